// Command finalizers keeps one external record per ExternalRecord through a finalizer, with
// periodic repair. It runs with the demo in-memory provider (DEMO ONLY: records are lost when the
// process exits); see README.md for plugging in a durable adapter.
package main

import (
	"github.com/kpatterns/kpatterns/finalizers/config"
	"github.com/kpatterns/kpatterns/shared/app"
)

var pattern = config.Pattern

func main() { app.Main(pattern) }
