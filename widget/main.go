// Command widget reconciles Widgets: one custom resource managing a ConfigMap, a Deployment and a
// Service through stages, with automatic status.
package main

import (
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/widget/api/v1alpha1"
	"github.com/kpatterns/kpatterns/widget/config"
	"github.com/kpatterns/kpatterns/widget/controller"
)

var pattern = app.Pattern{
	Name:        controller.Name,
	Config:      config.FS,
	AddToScheme: v1alpha1.AddToScheme,
	Cache:       controller.CacheOptions,
	Setup:       controller.Setup,
	Webhooks:    controller.SetupWebhooks,
}

func main() { app.Main(pattern) }
