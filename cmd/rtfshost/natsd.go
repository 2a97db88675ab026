package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"
)

// natsdCmd runs an embedded nats-server with JetStream, for trying a cluster
// of rtfshost hosts on one machine; production points at a real NATS
// cluster.
func (a *app) natsdCmd() *cobra.Command {
	var dataDir, listen string
	cmd := &cobra.Command{
		Use:   "natsd",
		Short: "Run a NATS server with JetStream for a cluster of hosts on one machine",
		Long: `natsd runs an embedded nats-server with JetStream until interrupted: file
storage in --data, every write synced to disk before it is acknowledged
(sync_interval: always), listening on --listen. Hosts join it with
rtfshost serve --cluster nats://ADDR --node NAME. It is for trying a cluster
on one machine; in production, point the hosts at a real NATS cluster.`,
		Example: `  rtfshost natsd --data /tmp/nats
  rtfshost natsd --data /tmp/nats --listen 127.0.0.1:4222`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return withCode(exitProgramError, errors.New("natsd: give --data DIR, where JetStream keeps its files"))
			}
			host, portText, err := net.SplitHostPort(listen)
			port, perr := strconv.Atoi(portText)
			if err != nil || perr != nil {
				return withCode(exitProgramError, fmt.Errorf("natsd: --listen %q is not host:port", listen))
			}
			s, err := server.NewServer(&server.Options{Host: host, Port: port, JetStream: true, StoreDir: dataDir,
				SyncAlways: true, NoSigs: true, ServerName: "rtfshost-natsd"})
			if err != nil {
				return withCode(exitStreamFailed, fmt.Errorf("natsd: %w", err))
			}
			go s.Start()
			if !s.ReadyForConnections(10 * time.Second) {
				s.Shutdown()
				return withCode(exitStreamFailed, fmt.Errorf("natsd: the server did not start listening on %s", listen))
			}
			fmt.Fprintf(a.stdout, "NATS with JetStream listening on %s (data in %s)\n", s.ClientURL(), dataDir)
			<-cmd.Context().Done()
			s.Shutdown()
			s.WaitForShutdown()
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data", "", "directory for JetStream's files (required)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:4222", "address to listen on")
	return cmd
}
