// Command mirror copies ConfigMaps labelled patterns.kpatterns.dev/mirror=true into owned children.
package main

import (
	"github.com/kpatterns/kpatterns/mirror/config"
	"github.com/kpatterns/kpatterns/mirror/controller"
	"github.com/kpatterns/kpatterns/shared/app"
)

var pattern = app.Pattern{
	Name:   controller.Name,
	Config: config.FS,
	Cache:  controller.CacheOptions,
	Setup:  controller.Setup,
}

func main() { app.Main(pattern) }
