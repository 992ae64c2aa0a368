// Command summary reports on existing Pods: a Workload's status counts the Pods its selector
// matches, by phase and readiness. It never writes a Pod.
package main

import (
	"embed"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	"github.com/kpatterns/kpatterns/summary/controller"
)

//go:embed config
var configFS embed.FS

var pattern = app.Pattern{
	Name:        controller.Name,
	Config:      configFS,
	AddToScheme: v1alpha1.AddToScheme,
	Cache:       controller.CacheOptions,
	Setup:       controller.Setup,
}

func main() { app.Main(pattern) }
