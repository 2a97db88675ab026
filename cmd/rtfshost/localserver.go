package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/internal/localserver"
)

func (a *app) localserverCmd() *cobra.Command {
	var listen string
	var stdio, asJSON bool
	cmd := &cobra.Command{
		Use:   "localserver",
		Short: "Run the reference streaming server alone",
		Long: `localserver serves the reference datasets (weather.monitor.v1, docs.search.v1,
news.digest.v1 and the counter.v1 generator) as raw SSE under /sse/<endpoint>,
as MCP tools on /mcp (Streamable HTTP) and /mcp-sse (legacy HTTP+SSE), until
interrupted. It listens on loopback only. With --stdio it serves the same
tools as an MCP server over its stdin and stdout instead (no listening), for
streams with :transport :stdio.`,
		Example: `  rtfshost localserver
  rtfshost localserver --listen 127.0.0.1:9000
  rtfshost localserver --stdio      # an MCP server on stdin/stdout
  curl -N 'http://127.0.0.1:2025/sse/counter.v1?limit=3'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := a.logger()
			if err != nil {
				return err
			}
			if stdio && asJSON {
				return withCode(exitProgramError, errors.New("localserver: --stdio and --json: on stdio, stdout carries MCP messages and nothing else"))
			}
			srv := localserver.New(localserver.Options{Logger: logger})
			if stdio {
				defer srv.Close()
				if err := srv.ServeStdio(cmd.Context(), io.NopCloser(a.stdin), nopWriteCloser{a.stdout}); err != nil {
					return withCode(exitStreamFailed, err)
				}
				return nil
			}
			if err := srv.Start(listen); err != nil {
				return withCode(exitStreamFailed, err)
			}
			if asJSON {
				writeListening(a.stdout, listeningLine{URL: srv.URL()})
			} else {
				fmt.Fprintf(a.stdout, "reference server listening on %s (raw SSE under %s/sse/, MCP on %s/mcp)\n", srv.URL(), srv.URL(), srv.URL())
			}
			<-cmd.Context().Done()
			return closeServer(cmd.Context(), srv)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", defaultLocalAddr, "loopback address to listen on")
	cmd.Flags().BoolVar(&stdio, "stdio", false, "serve the MCP tools on stdin/stdout instead of listening")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print where it listens as one JSON object, and errors as JSON lines")
	return cmd
}

// nopWriteCloser lets the command's stdout serve as an MCP transport's
// writer without the transport closing it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func closeServer(_ context.Context, srv *localserver.Server) error {
	if err := srv.Close(); err != nil {
		return withCode(exitStreamFailed, fmt.Errorf("closing the reference server: %w", err))
	}
	return nil
}
