// Command deploypolicy enforces a namespace's Deployment policy at admission: a defaulted team
// label, a replica ceiling (also on /scale), an immutable team label and delete protection.
package main

import (
	"embed"

	"github.com/kpatterns/kpatterns/deploypolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/app"
)

//go:embed config
var configFS embed.FS

var pattern = app.Pattern{
	Name:          webhook.Name,
	Config:        configFS,
	Webhooks:      webhook.Setup,
	AdmissionOnly: true,
}

func main() { app.Main(pattern) }
