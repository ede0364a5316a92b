// compose_check validates the docker compose stack without a Docker engine (this machine has
// only the docker client): the compose file is loaded by compose-go, the library of
// `docker compose config` (schema, interpolation, references between services); every
// bind-mounted file and build context exists in the repository; every Dockerfile parses with
// BuildKit's own parser into valid instructions, is multi-stage, and its final stage runs
// as a non-root user. Prints the normalized configuration; exits 1 naming every problem.
//
//	go run ./tests/compose_check compose/docker-compose.yml
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: compose_check COMPOSE_FILE")
		os.Exit(1)
	}
	problems := check(os.Args[1])
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "compose_check:", p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}

func check(file string) []string {
	var problems []string
	options, err := cli.NewProjectOptions([]string{file}, cli.WithOsEnv, cli.WithDotEnv, cli.WithName("inventory-feed"))
	if err != nil {
		return []string{err.Error()}
	}
	project, err := options.LoadProject(context.Background())
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", file, err)}
	}
	out, err := project.MarshalYAML()
	if err != nil {
		return []string{err.Error()}
	}
	os.Stdout.Write(out)
	for name, service := range project.Services {
		for _, v := range service.Volumes {
			if v.Type != "bind" {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				problems = append(problems, fmt.Sprintf("service %s mounts %s, which does not exist", name, v.Source))
			}
		}
		if service.Build == nil {
			if service.Image == "" {
				problems = append(problems, fmt.Sprintf("service %s has neither an image nor a build", name))
			}
			continue
		}
		dockerfile := service.Build.Dockerfile
		if !filepath.IsAbs(dockerfile) {
			dockerfile = filepath.Join(service.Build.Context, dockerfile)
		}
		if _, err := os.Stat(service.Build.Context); err != nil {
			problems = append(problems, fmt.Sprintf("service %s: build context %s: %v", name, service.Build.Context, err))
		}
		problems = append(problems, checkDockerfile(dockerfile)...)
	}
	return problems
}

func checkDockerfile(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", path, err)}
	}
	result, err := parser.Parse(bytes.NewReader(data))
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", path, err)}
	}
	var problems []string
	for _, w := range result.Warnings {
		problems = append(problems, fmt.Sprintf("%s:%d: %s", path, w.Location.Start.Line, w.Short))
	}
	stages, _, err := instructions.Parse(result.AST, nil)
	if err != nil {
		return append(problems, fmt.Sprintf("%s: %v", path, err))
	}
	if len(stages) < 2 {
		problems = append(problems, fmt.Sprintf("%s: one stage; the runtime image should not carry the build tools", path))
	}
	final := stages[len(stages)-1]
	user := ""
	for _, cmd := range final.Commands {
		if u, ok := cmd.(*instructions.UserCommand); ok {
			user = u.User
		}
		if c, ok := cmd.(*instructions.CopyCommand); ok && c.From != "" {
			known := false
			for _, s := range stages {
				known = known || strings.EqualFold(s.Name, c.From)
			}
			if !known {
				problems = append(problems, fmt.Sprintf("%s: COPY --from=%s names no stage", path, c.From))
			}
		}
	}
	if user == "" || user == "root" || user == "0" {
		problems = append(problems, fmt.Sprintf("%s: the final stage runs as root", path))
	}
	fmt.Fprintf(os.Stderr, "compose_check: %s: %d stages, final from %s, user %s\n", path, len(stages), final.BaseName, user)
	return problems
}
