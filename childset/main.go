// Command childset reconciles Bundles: one ConfigMap per entry, and guarded pruning of the
// ConfigMaps of entries that left the spec.
package main

import (
	"github.com/kpatterns/kpatterns/childset/api/v1alpha1"
	"github.com/kpatterns/kpatterns/childset/config"
	"github.com/kpatterns/kpatterns/childset/controller"
	"github.com/kpatterns/kpatterns/shared/app"
)

var pattern = app.Pattern{
	Name:        controller.Name,
	Config:      config.FS,
	AddToScheme: v1alpha1.AddToScheme,
	Cache:       controller.CacheOptions,
	Setup:       controller.Setup,
}

func main() { app.Main(pattern) }
