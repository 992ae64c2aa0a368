// Command finalizers keeps one external record per ExternalRecord through a finalizer, with
// periodic repair. It runs with the demo in-memory provider (DEMO ONLY: records are lost when the
// process exits); see README.md for plugging in a durable adapter.
package main

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	"github.com/kpatterns/kpatterns/finalizers/config"
	"github.com/kpatterns/kpatterns/finalizers/controller"
	"github.com/kpatterns/kpatterns/finalizers/provider"
	"github.com/kpatterns/kpatterns/shared/app"
)

var opts controller.Options

var pattern = app.Pattern{
	Name:        controller.Name,
	Config:      config.FS,
	AddToScheme: v1alpha1.AddToScheme,
	RunFlags:    opts.BindFlags,
	Setup: func(mgr ctrl.Manager) error {
		demo := provider.NewDemo(opts.Demo) // a durable adapter goes here
		if err := controller.RegisterDemoMetrics(demo); err != nil {
			return err
		}
		return controller.Setup(mgr, demo, opts)
	},
}

func main() { app.Main(pattern) }
