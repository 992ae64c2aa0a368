module github.com/kpatterns/kpatterns/e2e

go 1.26.4
