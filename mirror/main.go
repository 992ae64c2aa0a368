// Command mirror copies ConfigMaps labelled patterns.kpatterns.dev/mirror=true into owned children.
package main

import (
	"embed"

	"github.com/kpatterns/kpatterns/mirror/controller"
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
