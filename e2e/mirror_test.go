// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/mirror/controller"
)

func TestMirror(t *testing.T) {
	ns := envconf.RandomName("mirror", 12)
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
	get := func(ctx context.Context, c client.Client, name string) (*corev1.ConfigMap, error) {
		cm := &corev1.ConfigMap{}
		return cm, c.Get(ctx, key(name), cm)
	}
	hasData := func(c client.Client, name string, want map[string]string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			cm, err := get(ctx, c, name)
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil && maps.Equal(cm.Data, want), err
		}
	}
	gone := func(c client.Client, name string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			_, err := get(ctx, c, name)
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		}
	}
	source := func(name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{controller.Label: controller.Source}}, Data: data}
	}

	f := withPattern(features.New("mirror"), "mirror", ns).
		Assess("a labelled source gets an owned child with its data", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			src := source("app", map[string]string{"greeting": "hello", "target": "world"})
			if err := c.Create(ctx, src); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "child app-mirror", hasData(c, "app-mirror", src.Data))
			child, _ := get(ctx, c, "app-mirror")
			if o := metav1.GetControllerOf(child); o == nil || o.UID != src.UID {
				t.Fatalf("child controller reference %+v, want source %s", o, src.UID)
			}
			return ctx
		}).
		Assess("a key removed from the source disappears from the child", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			src, err := get(ctx, c, "app")
			if err != nil {
				t.Fatal(err)
			}
			delete(src.Data, "target")
			if err := c.Update(ctx, src); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "key removal", hasData(c, "app-mirror", map[string]string{"greeting": "hello"}))
			return ctx
		}).
		Assess("removing the label deletes the child", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			src := source("unlabel", map[string]string{"k": "v"})
			if err := c.Create(ctx, src); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "child unlabel-mirror", hasData(c, "unlabel-mirror", src.Data))
			delete(src.Labels, controller.Label)
			if err := c.Update(ctx, src); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "child deleted after label removal", gone(c, "unlabel-mirror"))
			return ctx
		}).
		Assess("a foreign <source>-mirror is reported, never changed", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken-mirror", Namespace: ns},
				Data: map[string]string{"owner": "someone else"}}
			if err := c.Create(ctx, foreign); err != nil {
				t.Fatal(err)
			}
			src := source("taken", map[string]string{"k": "v"})
			if err := c.Create(ctx, src); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "Warning event on the source", func(ctx context.Context) (bool, error) {
				list := &eventsv1.EventList{}
				if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
					return false, err
				}
				for _, e := range list.Items {
					if e.Regarding.UID == src.UID && e.Reason == controller.ReasonChildConflict && e.Type == corev1.EventTypeWarning {
						return true, nil
					}
				}
				return false, nil
			})
			after, err := get(ctx, c, "taken-mirror")
			if err != nil || after.ResourceVersion != foreign.ResourceVersion {
				t.Fatalf("foreign ConfigMap changed: %+v, %v", after, err)
			}
			return ctx
		}).
		Assess("deleting the source lets the garbage collector delete the child", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			src, err := get(ctx, c, "app")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(ctx, src); err != nil {
				t.Fatal(err)
			}
			waitFor(t, fmt.Sprintf("garbage collection of %s/app-mirror", ns), gone(c, "app-mirror"))
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
