// Command multi runs the mirror, reloader and summary controllers in one process: one manager
// (one cache, one client, one metrics endpoint, one Lease), each controller with its own name,
// queue, rate limiter and metrics. Its manifests are the union of the three patterns' generated
// files (app.Compose).
package main

import (
	"fmt"
	"os"

	mirrorconfig "github.com/kpatterns/kpatterns/mirror/config"
	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	reloaderconfig "github.com/kpatterns/kpatterns/reloader/config"
	reloader "github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/app"
	summaryv1alpha1 "github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	summaryconfig "github.com/kpatterns/kpatterns/summary/config"
	summary "github.com/kpatterns/kpatterns/summary/controller"
)

// Name is the composition's name: its ServiceAccount, ClusterRole and Lease.
const Name = "multi"

// Members are the composed patterns, declared as each one's own main.go declares it.
var Members = []app.Pattern{
	{Name: mirror.Name, Config: mirrorconfig.FS, Cache: mirror.CacheOptions, Setup: mirror.Setup},
	{Name: reloader.Name, Config: reloaderconfig.FS, Cache: reloader.CacheOptions, Setup: reloader.Setup},
	{Name: summary.Name, Config: summaryconfig.FS, AddToScheme: summaryv1alpha1.AddToScheme, Cache: summary.CacheOptions, Setup: summary.Setup},
}

func main() {
	p, err := app.Compose(Name, Members...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "multi:", err)
		os.Exit(1)
	}
	app.Main(p)
}
