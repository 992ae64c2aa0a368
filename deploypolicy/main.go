// Command deploypolicy enforces a namespace's Deployment policy at admission: a defaulted team
// label, a replica ceiling (also on /scale), an immutable team label and delete protection.
package main

import (
	"github.com/kpatterns/kpatterns/deploypolicy/config"
	"github.com/kpatterns/kpatterns/shared/app"
)

var pattern = config.Pattern

func main() { app.Main(pattern) }
