// Command reloader rolls opted-in Deployments when a ConfigMap they reference changes.
package main

import (
	"github.com/kpatterns/kpatterns/reloader/config"
	"github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/app"
)

var pattern = app.Pattern{
	Name:   controller.Name,
	Config: config.FS,
	Cache:  controller.CacheOptions,
	Setup:  controller.Setup,
}

func main() { app.Main(pattern) }
