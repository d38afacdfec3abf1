//go:build tools

// Package main's tools file pins the code generator that `make generate` runs.
package main

import _ "github.com/99designs/gqlgen"
