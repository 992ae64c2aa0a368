// Command dbpolicy validates another operator's Database objects at admission, from the request's
// old and new objects alone: storage only grows, the engine is immutable, the version never goes
// back, and the required fields are there.
package main

import (
	"github.com/kpatterns/kpatterns/dbpolicy/config"
	"github.com/kpatterns/kpatterns/shared/app"
)

var pattern = config.Pattern

func main() { app.Main(pattern) }
