// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controller makes the lifetime hooks of shared/app observable. While a replica leads it
// keeps a Heartbeat — its term, a beat every interval — and its leader exit hook marks the term
// ended once its workers have stopped; every hook is logged and emitted as an Event. An observe
// controller emits one Observed Event per version of each ConfigMap labelled
// patterns.kpatterns.dev/observe=true, idempotently, so work during a handover is visible and
// none is lost or repeated.
package controller

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/lifespan/api/v1alpha1"
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/status"
)

// Name is the pattern's name, its Heartbeat's name and its Events' reporting controller.
const Name = "lifespan"

// ObserveLabel=true opts a ConfigMap in to Observed events.
const ObserveLabel = "patterns.kpatterns.dev/observe"

// EmittedByLabel=lifespan marks the Events the pattern creates, so that its cache holds them.
const EmittedByLabel = "patterns.kpatterns.dev/emitted-by"

// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=heartbeats,verbs=get;create
// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=heartbeats/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=list;watch;create

// Reason is the reason of an Event the pattern emits: one per lifetime hook, and Observed.
type Reason string

// The Reasons.
const (
	Started    Reason = "Started"    // the process started (every replica)
	Acquired   Reason = "Acquired"   // this replica became leader
	LeaderExit Reason = "LeaderExit" // its leadership ended, its workers stopped
	Exit       Reason = "Exit"       // the process is about to end (every replica)
	Observed   Reason = "Observed"   // the leader saw a version of a labelled ConfigMap
)

// Event is one thing the pattern reports: logged, and created as an events.k8s.io Event.
type Event struct {
	Reason    Reason
	Regarding corev1.ObjectReference
	Note      string
	Warning   bool
	// Name, if set, makes the Event idempotent: a second emit of the same name is a no-op.
	Name string
}

// Options are the pattern's flags of `run`.
type Options struct {
	HeartbeatInterval time.Duration
}

// BindFlags binds the options to run's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", 2*time.Second, "how often the leader writes its heartbeat")
}

// CacheOptions narrows the informers to labelled ConfigMaps and the pattern's own Events.
func CacheOptions(o *cache.Options) {
	app.CacheByObject(o, &corev1.ConfigMap{}, cache.ByObject{Label: labels.SelectorFromSet(labels.Set{ObserveLabel: "true"})})
	app.CacheByObject(o, &eventsv1.Event{}, cache.ByObject{Label: labels.SelectorFromSet(labels.Set{EmittedByLabel: Name})})
}

// Lifespan is the pattern: its hooks (for app.Hooks), the heartbeat and the observe controller.
type Lifespan struct {
	Options
	namespace string        // the operator namespace: the Heartbeat's
	client    client.Client // cache reads (ConfigMaps, Events); writes
	reader    client.Reader // live reads of the Heartbeat
	log       logr.Logger
	instance  atomic.Pointer[string] // the leader identity once Acquired ran, else the host name
	acquired  chan string            // the identity, from the Acquired hook to the heartbeat
	// mu orders the heartbeat's writes and LeaderExit's: after a lost Lease the manager does not
	// wait for the heartbeat to stop, so its last write may still be in flight.
	mu   sync.Mutex
	last *v1alpha1.Heartbeat // the Heartbeat as last read or written
}

// Hooks are the pattern's lifetime hooks, for app.Serve.
func (l *Lifespan) Hooks() app.Hooks {
	return app.Hooks{Started: l.Started, Acquired: l.Acquired, LeaderExit: l.LeaderExit, Exit: l.Exit}
}

// Setup registers the heartbeat and the observe controller; namespace is the operator namespace.
func (l *Lifespan) Setup(mgr ctrl.Manager, namespace string) error {
	l.namespace, l.client, l.reader = namespace, mgr.GetClient(), mgr.GetAPIReader()
	l.log = mgr.GetLogger().WithName(Name)
	l.acquired = make(chan string, 1)
	host, _ := os.Hostname()
	l.instance.Store(&host)
	if err := mgr.Add(heartbeat{l}); err != nil {
		return err
	}
	// The Event informer is registered now, so the cache is synced with it before any reconcile.
	if _, err := mgr.GetCache().GetInformer(context.Background(), &eventsv1.Event{}, cache.BlockUntilSynced(false)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named(Name+"-observe").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.Funcs{DeleteFunc: func(event.DeleteEvent) bool { return false }})).
		Complete(reconcile.Func(l.observe))
}

// observe emits one Observed Event per version of a labelled ConfigMap. The Event's name is the
// ConfigMap's name and resourceVersion, so a version already observed — by this replica or an
// earlier leader — is found in the cache (or the create is refused as existing) and not repeated.
// Versions replaced before the reconcile ran are not observed: the queue holds keys, not versions.
func (l *Lifespan) observe(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cm := &corev1.ConfigMap{}
	if err := l.client.Get(ctx, req.NamespacedName, cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	name := ObservedEventName(cm)
	err := l.client.Get(ctx, client.ObjectKey{Namespace: cm.Namespace, Name: name}, &eventsv1.Event{})
	if err == nil || !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, l.emit(ctx, Event{Name: name, Reason: Observed,
		Regarding: corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: cm.ResourceVersion},
		Note:      fmt.Sprintf("observed version %s of ConfigMap %s/%s", cm.ResourceVersion, cm.Namespace, cm.Name)})
}

// ObservedEventName names the Observed Event of a ConfigMap's version.
func ObservedEventName(cm *corev1.ConfigMap) string {
	name := cm.Name
	if len(name) > 200 {
		name = name[:200]
	}
	return name + ".observed." + cm.ResourceVersion
}

// Started is the process-scope start hook.
func (l *Lifespan) Started(ctx context.Context) error {
	l.lifetime(ctx, Event{Reason: Started, Note: fmt.Sprintf("process %d started on %s", os.Getpid(), *l.instance.Load())})
	return nil
}

// Acquired is the leader-scope start hook: it hands the term to the heartbeat.
func (l *Lifespan) Acquired(ctx context.Context, identity string) {
	l.instance.Store(&identity)
	l.lifetime(ctx, Event{Reason: Acquired, Note: "became leader as " + identity})
	l.acquired <- identity
}

// LeaderExit marks this replica's term stopped, with the loss as its cause — only while the term
// is still the Heartbeat's latest: a replica that took over since owns the Heartbeat now, and the
// optimistic lock of the update makes that check and the write one step.
func (l *Lifespan) LeaderExit(ctx context.Context, identity string, cause error) {
	note := "leadership of " + identity + " ended; workers stopped"
	if cause != nil {
		note += ": " + cause.Error()
	}
	now := metav1.NowMicro()
	err := l.write(ctx, func(h *v1alpha1.Heartbeat) bool {
		t := h.Current()
		switch {
		case t == nil || !slices.ContainsFunc(h.Status.Terms, func(t v1alpha1.Term) bool { return t.Holder == identity }):
			note += " (its term was never written)"
			return false
		case t.Holder != identity:
			note += " (another replica leads: its term left as it was)"
			return false
		}
		t.Stopped = &now
		if cause != nil {
			t.StopCause = truncate(cause.Error(), 1024)
		}
		return true
	})
	if err != nil {
		l.log.Error(err, "marking the term stopped", "holder", identity)
	}
	l.lifetime(ctx, Event{Reason: LeaderExit, Note: note, Warning: cause != nil})
}

// Exit is the process-scope exit hook.
func (l *Lifespan) Exit(ctx context.Context, cause error) {
	note := fmt.Sprintf("process %d exiting", os.Getpid())
	if cause != nil {
		note += ": " + cause.Error()
	}
	l.lifetime(ctx, Event{Reason: Exit, Note: note, Warning: cause != nil})
}

// lifetime emits a hook's Event regarding the Heartbeat; a failure is logged, never fatal.
func (l *Lifespan) lifetime(ctx context.Context, e Event) {
	e.Regarding = corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Heartbeat", Namespace: l.namespace, Name: Name}
	if err := l.emit(ctx, e); err != nil {
		l.log.Error(err, "emitting an event", "reason", e.Reason)
	}
}

// emit logs e and creates it as an Event in the regarding object's namespace.
func (l *Lifespan) emit(ctx context.Context, e Event) error {
	instance := *l.instance.Load()
	l.log.Info(e.Note, "reason", e.Reason, "regarding", e.Regarding.Kind+" "+e.Regarding.Namespace+"/"+e.Regarding.Name, "instance", instance)
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Regarding.Namespace, Name: e.Name, Labels: map[string]string{EmittedByLabel: Name}},
		EventTime:  metav1.NowMicro(), ReportingController: Name, ReportingInstance: truncate(instance, 128),
		Action: string(e.Reason), Reason: string(e.Reason), Regarding: e.Regarding, Note: truncate(e.Note, 1024), Type: corev1.EventTypeNormal,
	}
	if e.Name == "" {
		ev.GenerateName = Name + "-" + strings.ToLower(string(e.Reason)) + "-"
	}
	if e.Warning {
		ev.Type = corev1.EventTypeWarning
	}
	err := l.client.Create(ctx, ev)
	if e.Name != "" && apierrors.IsAlreadyExists(err) {
		return nil // emitted before
	}
	return err
}

// heartbeat is the leader's runnable: from the Acquired hook's term on, a beat every interval. The
// manager stops it — as every leader-election runnable — before it releases the Lease, so a
// term's last beat precedes the next leader's Acquired.
type heartbeat struct{ *Lifespan }

func (heartbeat) NeedLeaderElection() bool { return true }

func (h heartbeat) Start(ctx context.Context) error {
	var identity string
	select {
	case identity = <-h.acquired:
	case <-ctx.Done():
		return nil
	}
	acquired := metav1.NowMicro()
	tick := time.NewTicker(h.HeartbeatInterval)
	defer tick.Stop()
	for {
		if err := h.beat(ctx, identity, acquired); err != nil && ctx.Err() == nil {
			h.log.Error(err, "writing the heartbeat") // retried at the next beat
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// beat starts this replica's term (the first beat) or extends it.
func (l *Lifespan) beat(ctx context.Context, identity string, acquired metav1.MicroTime) error {
	return l.write(ctx, func(h *v1alpha1.Heartbeat) bool {
		now := metav1.NowMicro()
		if t := h.Current(); t != nil && t.Holder == identity {
			t.LastBeat, t.Beats = now, t.Beats+1
			return true
		}
		l.log.Info("term started", "holder", identity, "sinceAcquired", now.Sub(acquired.Time).String())
		h.Status.Terms = append(h.Status.Terms, v1alpha1.Term{Holder: identity, Acquired: acquired, LastBeat: now, Beats: 1})
		if n := len(h.Status.Terms); n > v1alpha1.MaxTerms {
			h.Status.Terms = h.Status.Terms[n-v1alpha1.MaxTerms:]
		}
		return true
	})
}

// write applies change to the Heartbeat (created if missing) and patches its status with an
// optimistic lock (status.Patcher); on a conflict it reads the Heartbeat again and re-applies
// change, which may then decline (false) — client-go's retry.OnError, five attempts.
func (l *Lifespan) write(ctx context.Context, change func(*v1alpha1.Heartbeat) bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := ctx.Err(); err != nil { // a beat after its runnable was stopped
		return err
	}
	key := client.ObjectKey{Namespace: l.namespace, Name: Name}
	conflict := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	err := retry.OnError(retry.DefaultRetry, conflict, func() error {
		h := l.last
		l.last = nil
		if h == nil {
			h = &v1alpha1.Heartbeat{}
			err := l.reader.Get(ctx, key, h)
			if apierrors.IsNotFound(err) {
				h = &v1alpha1.Heartbeat{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
				err = l.client.Create(ctx, h)
			}
			if err != nil {
				return err
			}
		}
		h = h.DeepCopy()
		patcher := status.NewPatcher(l.client, h)
		if !change(h) {
			return nil
		}
		if err := patcher.Patch(ctx, h); err != nil {
			return err
		}
		l.last = h
		return nil
	})
	if conflict(err) {
		return fmt.Errorf("the heartbeat kept changing under this replica: gave up after %d attempts: %w", retry.DefaultRetry.Steps, err)
	}
	return err
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
