// Command conditional reconciles ConfigProfiles: first-match cases generate a configuration that
// an owned Deployment rolls out by checksum.
package main

import (
	"github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
	"github.com/kpatterns/kpatterns/conditional/config"
	"github.com/kpatterns/kpatterns/conditional/controller"
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
