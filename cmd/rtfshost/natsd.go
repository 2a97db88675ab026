package main

import (
	"errors"
	"fmt"
	"log/slog"
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
	var asJSON bool
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
			logger, err := a.logger()
			if err != nil {
				return err
			}
			if port == 0 {
				port = server.RANDOM_PORT // nats-server reads 0 as its default, 4222
			}
			s, err := server.NewServer(&server.Options{Host: host, Port: port, JetStream: true, StoreDir: dataDir,
				SyncAlways: true, NoSigs: true, ServerName: "rtfshost-natsd"})
			if err != nil {
				return withCode(exitStreamFailed, fmt.Errorf("natsd: %w", err))
			}
			nl := &natsLog{log: logger, fatal: make(chan error, 1)}
			s.SetLogger(nl, false, false)
			go s.Start()
			if err := waitListening(s, nl.fatal, 10*time.Second); err != nil {
				s.Shutdown()
				s.WaitForShutdown()
				return withCode(exitStreamFailed, fmt.Errorf("natsd: nats-server did not start: %w", err))
			}
			if asJSON {
				writeListening(a.stdout, listeningLine{URL: s.ClientURL(), Data: dataDir})
			} else {
				fmt.Fprintf(a.stdout, "NATS with JetStream listening on %s (data in %s)\n", s.ClientURL(), dataDir)
			}
			<-cmd.Context().Done()
			s.Shutdown()
			s.WaitForShutdown()
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data", "", "directory for JetStream's files (required)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:4222", "address to listen on")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print where it listens as one JSON object, and errors as JSON lines")
	return cmd
}

// waitListening waits until s accepts connections, and fails at once with
// the error s reported as fatal (the address is in use, JetStream cannot
// use its directory), or after timeout.
func waitListening(s *server.Server, fatal <-chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !s.ReadyForConnections(50 * time.Millisecond) {
		select {
		case err := <-fatal:
			return err
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server did not start listening within %v", timeout)
		}
	}
	return nil
}

// natsLog passes an embedded nats-server's logs to natsd's logger (its
// notices at info level, so quiet by default), and its first fatal error,
// which the server reports without stopping, to fatal.
type natsLog struct {
	log   *slog.Logger
	fatal chan error // capacity 1
}

func (l *natsLog) Noticef(format string, v ...any) {
	l.log.Info("nats-server: " + fmt.Sprintf(format, v...))
}
func (l *natsLog) Warnf(format string, v ...any) {
	l.log.Warn("nats-server: " + fmt.Sprintf(format, v...))
}
func (l *natsLog) Errorf(format string, v ...any) {
	l.log.Error("nats-server: " + fmt.Sprintf(format, v...))
}
func (l *natsLog) Debugf(format string, v ...any) {
	l.log.Debug("nats-server: " + fmt.Sprintf(format, v...))
}
func (l *natsLog) Tracef(format string, v ...any) {
	l.log.Debug("nats-server: " + fmt.Sprintf(format, v...))
}

func (l *natsLog) Fatalf(format string, v ...any) {
	select {
	case l.fatal <- fmt.Errorf(format, v...):
	default:
	}
}
