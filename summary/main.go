// Command summary reports on existing Pods: a Workload's status counts the Pods its selector
// matches, by phase and readiness. It never writes a Pod.
package main

import (
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/summary/config"
)

var pattern = config.Pattern

func main() { app.Main(pattern) }
