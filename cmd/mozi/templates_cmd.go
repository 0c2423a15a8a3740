package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/templates"
)

func runTemplates(_ context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "templates")
	configPath := fs.String("config", "", "configuration file (gives templates.locale and templates.override)")
	locale := fs.String("locale", "", "locale to use instead of the configuration's")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usagef("templates needs: check [FILE] | show ACTION [BUSINESS]")
	}
	cfg, err := config.Load(*configPath, e.getenv)
	if err != nil {
		return err
	}
	loc, override := cfg.Templates.Locale, cfg.Templates.Override
	if *locale != "" {
		loc = *locale
	}
	switch fs.Arg(0) {
	case "check":
		if fs.NArg() > 2 {
			return usagef("templates check takes at most one FILE")
		}
		if fs.NArg() == 2 {
			override = fs.Arg(1)
		}
		if _, err := templates.Load(loc, override); err != nil {
			return err
		}
		what := "built-in " + loc + " templates"
		if override != "" {
			what += " with " + override + " merged over them"
		}
		fmt.Fprintf(e.stdout, "ok: %s: every action and business type is complete and every placeholder is known\n", what)
		return nil
	case "show":
		if fs.NArg() < 2 || fs.NArg() > 3 {
			return usagef("templates show ACTION [BUSINESS]")
		}
		action, err := task.ParseActionType(fs.Arg(1))
		if err != nil {
			return usagef("%v", err)
		}
		var business task.BusinessType
		if fs.NArg() == 3 {
			if business, err = task.ParseBusinessType(fs.Arg(2)); err != nil {
				return usagef("%v", err)
			}
		}
		set, err := templates.Load(loc, override)
		if err != nil {
			return err
		}
		tpl, err := set.Resolve(action, business)
		if err != nil {
			return err
		}
		w := e.stdout
		fmt.Fprintf(w, "action: %s", action)
		if action == task.ActionIssueAssigned {
			fmt.Fprintf(w, " / %s", cmpOr(string(business), "feature"))
		}
		fmt.Fprintf(w, " (locale %s)\n\nhint: %s\n", loc, tpl.Hint)
		if tpl.Role != "" {
			fmt.Fprintf(w, "role: %s\n", tpl.Role)
		}
		fmt.Fprintln(w, "\nsteps:")
		for i, s := range tpl.Steps {
			fmt.Fprintf(w, "  %d. %s\n", i+1, s)
		}
		if strings.TrimSpace(tpl.OutputTemplate) == "" {
			fmt.Fprintln(w, "\noutput template: none (a notification)")
		} else {
			fmt.Fprintf(w, "\noutput template:\n%s\n", indent(strings.TrimRight(tpl.OutputTemplate, "\n"), "  "))
			fmt.Fprintf(w, "\nreport fields checked: %s\n", strings.Join(set.ReportFields(action, business), ", "))
		}
		fmt.Fprintf(w, "\nplaceholders: {%s}\n", strings.Join(templates.ActionVars(action), "} {"))
		return nil
	}
	return usagef("templates: unknown action %q (want check or show)", fs.Arg(0))
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

func cmpOr(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}
