package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// A docEntry is one thing doc can describe: a core function, a special form
// or macro, or a host call (capability).
type docEntry struct {
	name, usage, doc, kind string
	capability             *capabilities.Capability
}

// docCmd prints the index of RTFS: the core library (rtfs.Universe), the
// special forms and macros (rtfs.Forms) and the host calls of rtfshost's
// host: one by name, those whose name contains a word, or all of them.
func (a *app) docCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doc [NAME]",
		Short: "Show the RTFS core functions, special forms and host calls: one by name, or all of them",
		Long: `doc prints the usage and one-line description of an RTFS core function
(a Go builtin or a prelude function), a special form or macro (let, defn,
try, ->>...), or a host call (call :mcp.stream.start, with its keys).
Without NAME it lists them all; a NAME that is none of them lists those
whose name contains it. NAME is taken as it is, so rtfshost doc ->> works.`,
		Example: `  rtfshost doc
  rtfshost doc update-in
  rtfshost doc let
  rtfshost doc ->>
  rtfshost doc mcp.stream.start`,
		// Names such as -> and ->> start like flags: doc reads its one
		// argument itself.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
				return cmd.Help()
			}
			// --json is the one flag; no RTFS name is spelled so.
			asJSON := slices.Contains(args, "--json")
			args = slices.DeleteFunc(args, func(a string) bool { return a == "--json" })
			write := func(list []docEntry) error {
				if asJSON {
					return writeDocJSON(a.stdout, list)
				}
				return writeDocList(a.stdout, list)
			}
			if len(args) > 1 {
				return withCode(exitProgramError, fmt.Errorf("doc takes at most one name, got %d arguments", len(args)))
			}
			entries, err := docEntries()
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return write(entries)
			}
			name := strings.TrimPrefix(args[0], ":")
			for _, e := range entries {
				if e.name == name {
					if asJSON {
						return writeDocJSON(a.stdout, []docEntry{e})
					}
					writeDocEntry(a.stdout, e)
					return nil
				}
			}
			var near []docEntry
			for _, e := range entries {
				if strings.Contains(e.name, name) {
					near = append(near, e)
				}
			}
			if len(near) == 0 {
				return withCode(exitProgramError, fmt.Errorf("no RTFS function, special form or host call is called %q or has it in its name (rtfshost doc lists them all)", args[0]))
			}
			if !asJSON {
				fmt.Fprintf(a.stdout, "nothing is called %q; these have it in their name:\n", args[0])
			}
			return write(near)
		},
	}
}

// docEntries gathers the functions, the forms and the host calls of a
// host with the default transports (made and closed again: it starts no
// stream and opens no store).
func docEntries() ([]docEntry, error) {
	var out []docEntry
	for _, d := range rtfs.Universe() {
		kind := "function"
		switch {
		case d.Constant:
			kind = "constant"
		case d.Prelude:
			kind = "function (prelude: written in RTFS; a host call in its callback suspends like any other)"
		}
		out = append(out, docEntry{name: d.Name, usage: d.Usage, doc: d.Doc, kind: kind})
	}
	for _, d := range rtfs.Forms() {
		out = append(out, docEntry{name: d.Name, usage: d.Usage, doc: d.Doc, kind: "special form"})
	}
	h, err := host.New(host.Options{Streams: provider.Options{Transports: host.DefaultTransports()}})
	if err != nil {
		return nil, withCode(exitProgramError, fmt.Errorf("doc: list the host calls: %w", err))
	}
	caps := h.Capabilities().List()
	if err := h.Close(); err != nil {
		return nil, withCode(exitProgramError, fmt.Errorf("doc: %w", err))
	}
	for i := range caps {
		c := &caps[i]
		usage := "(call :" + c.ID + " args...)"
		if c.Input != nil && c.Input.Type == "map" {
			usage = "(call :" + c.ID + " {" + keyList(c.Input) + "})"
		}
		out = append(out, docEntry{name: c.ID, usage: usage, doc: c.Description, kind: "host call", capability: c})
	}
	return out, nil
}

// keyList is a map schema's required keys, then "...".
func keyList(s *capabilities.Schema) string {
	var req []string
	for _, k := range s.Keys {
		if k.Required {
			req = append(req, ":"+k.Name+" ..")
		}
	}
	if len(req) < len(s.Keys) {
		req = append(req, "...")
	}
	return strings.Join(req, " ")
}

func writeDocEntry(w io.Writer, e docEntry) {
	fmt.Fprintf(w, "%s\n  %s\n  (%s)\n", e.usage, e.doc, e.kind)
	if e.capability == nil || e.capability.Input == nil || len(e.capability.Input.Keys) == 0 {
		return
	}
	fmt.Fprintln(w, "  keys:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range e.capability.Input.Keys {
		req := ""
		if k.Required {
			req = ", required"
		}
		doc := k.Doc
		if len(k.Enum) > 0 {
			doc += " (one of :" + strings.Join(k.Enum, " :") + ")"
		}
		fmt.Fprintf(tw, "    :%s\t%s%s\t%s\n", k.Name, k.Type, req, doc)
	}
	tw.Flush()
}

// docLine is doc --json's object for one entry.
type docLine struct {
	Type  string       `json:"type"` // "doc"
	Name  string       `json:"name"`
	Kind  string       `json:"kind"` // function, special form, host call
	Usage string       `json:"usage"`
	Doc   string       `json:"doc"`
	Keys  []docKeyLine `json:"keys,omitempty"` // a host call's map keys
}

type docKeyLine struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Required bool     `json:"required,omitempty"`
	Enum     []string `json:"enum,omitempty"`
	Doc      string   `json:"doc,omitempty"`
}

// writeDocJSON writes one docLine per entry.
func writeDocJSON(w io.Writer, entries []docEntry) error {
	for _, e := range entries {
		l := docLine{Type: "doc", Name: e.name, Kind: e.kind, Usage: e.usage, Doc: e.doc}
		if strings.HasPrefix(l.Kind, "function") {
			l.Kind = "function"
		}
		if e.capability != nil && e.capability.Input != nil {
			for _, k := range e.capability.Input.Keys {
				l.Keys = append(l.Keys, docKeyLine{Name: k.Name, Type: k.Type, Required: k.Required, Enum: k.Enum, Doc: k.Doc})
			}
		}
		if err := writeJSON(w, l); err != nil {
			return err
		}
	}
	return nil
}

func writeDocList(w io.Writer, entries []docEntry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	last := ""
	for _, e := range entries {
		section := e.kind
		if strings.HasPrefix(section, "function") || section == "constant" {
			section = "functions" // the constants (Math/PI) stand among them, by name
		} else {
			section += "s"
		}
		if section != last {
			if last != "" {
				fmt.Fprintln(tw)
			}
			fmt.Fprintf(tw, "%s:\n", section)
			last = section
		}
		fmt.Fprintf(tw, "%s\t%s\n", e.usage, e.doc)
	}
	return tw.Flush()
}
