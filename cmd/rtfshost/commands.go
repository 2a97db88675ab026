package main

import "github.com/spf13/cobra"

// addCommands adds the commands that need the host, the store and the servers.
func (a *app) addCommands(root *cobra.Command) {
	root.AddCommand(a.runCmd(), a.localserverCmd(), a.serveCmd(), a.inspectCmd(), a.resumeCmd(),
		a.cancelCmd(), a.pauseCmd(), a.rmCmd(), a.upgradeCmd(), a.deadLettersCmd(), a.natsdCmd())
}
