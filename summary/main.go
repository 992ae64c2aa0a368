// Command summary reports on existing Pods: a Workload's status counts the Pods its selector
// matches, by phase and readiness. It never writes a Pod.
package main

import (
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	"github.com/kpatterns/kpatterns/summary/config"
	"github.com/kpatterns/kpatterns/summary/controller"
)

var pattern = app.Pattern{
	Name:        controller.Name,
	Config:      config.FS,
	AddToScheme: v1alpha1.AddToScheme,
	Cache:       controller.CacheOptions,
	Setup:       controller.Setup,
}

func main() { app.Main(pattern) }
