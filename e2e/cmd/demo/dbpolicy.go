// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/dbpolicy/thirdparty"
	dbpolicy "github.com/kpatterns/kpatterns/dbpolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/app"
)

func (d *demo) dbpolicy() error {
	step("Install the Database CRD as its own operator would: dbpolicy validates Databases but never installs or owns their CRD")
	crd, err := thirdparty.DatabaseCRD()
	if err != nil {
		return err
	}
	if err := app.Install(d.ctx, d.cfg, []client.Object{crd}, os.Stdout); err != nil {
		return err
	}
	if err := d.start("dbpolicy"); err != nil {
		return err
	}
	orders := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"engine": "postgres", "version": "16.2", "storageGiB": int64(20)}}}
	orders.SetGroupVersionKind(dbpolicy.DatabaseGVK)
	orders.SetNamespace(policyNS)
	orders.SetName("demo-orders")
	step("Create Database demo-orders (postgres 16.2, 20 GiB) in " + policyNS)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) { // until the new kind is served
		_ = d.c.Delete(d.ctx, orders.DeepCopy()) // a previous run's
		err := d.c.Create(d.ctx, orders.DeepCopy())
		if err == nil {
			break
		}
		if !meta.IsNoMatchError(err) && !apierrors.IsAlreadyExists(err) || time.Now().After(deadline) {
			return err
		}
	}
	fmt.Println("    database.database.example.com/demo-orders created")
	patch := func(p string) error {
		fmt.Printf("    kubectl -n %s patch database demo-orders --type=merge -p '%s'\n", policyNS, p)
		return d.c.Patch(d.ctx, orders.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(p)))
	}
	step("Shrink its storage: denied, judged from the request's old and new objects alone (no cache, no reads, no RBAC)")
	if err := expectDenied(patch(`{"spec":{"storageGiB":10}}`)); err != nil {
		return err
	}
	step("Grow it, and try to switch engines")
	if err := patch(`{"spec":{"storageGiB":40}}`); err != nil {
		return err
	}
	fmt.Println("    database.database.example.com/demo-orders patched")
	return expectDenied(patch(`{"spec":{"engine":"mysql"}}`))
}
