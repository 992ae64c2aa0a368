// Command reloader rolls opted-in Deployments when a ConfigMap they reference changes.
package main

import (
	"embed"

	"github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/app"
)

//go:embed config
var configFS embed.FS

var pattern = app.Pattern{
	Name:   controller.Name,
	Config: configFS,
	Cache:  controller.CacheOptions,
	Setup:  controller.Setup,
}

func main() { app.Main(pattern) }
