// Command multi runs the mirror, reloader and summary controllers in one process: one manager
// (one cache, one client, one metrics endpoint, one Lease), each controller with its own name,
// queue, rate limiter and metrics. Its manifests are the union of the three patterns' generated
// files (app.Compose).
package main

import (
	"fmt"
	"os"

	mirror "github.com/kpatterns/kpatterns/mirror/config"
	reloader "github.com/kpatterns/kpatterns/reloader/config"
	"github.com/kpatterns/kpatterns/shared/app"
	summary "github.com/kpatterns/kpatterns/summary/config"
)

// Name is the composition's name: its ServiceAccount, ClusterRole and Lease.
const Name = "multi"

// Members are the composed patterns, exactly as their own binaries declare them.
var Members = []app.Pattern{mirror.Pattern, reloader.Pattern, summary.Pattern}

func main() {
	p, err := app.Compose(Name, Members...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "multi:", err)
		os.Exit(1)
	}
	app.Main(p)
}
