// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// errLost: another process took the member's Lease (this one was seen expired).
var errLost = errors.New("shard: the member Lease was taken over")

// member is one replica of the ring: it keeps its Lease, and runs a worker over the ranges it
// holds. Its invariant: it works only on ranges its Lease says it holds — it publishes a range
// before it starts working on it, and stops working on a range before it publishes that it gave
// it up.
type member struct {
	mgr      manager.Manager
	o        Options
	log      logr.Logger
	identity string // holderIdentity of this process: a restarted replica is a new holder
	alive    liveness
	live     map[string]*coordinationv1.Lease // the live members at the last step

	lease     *coordinationv1.Lease // as last written by this process (nil: read it first)
	published Member
	renewed   time.Time // when the last successful write was sent
	// renewedAt is renewed for the health check (UnixNano; 0 before the first renewal).
	renewedAt atomic.Int64

	work    *worker
	working Set
}

func newMember(mgr manager.Manager, o Options) *member {
	return &member{mgr: mgr, o: o, identity: o.Member + "_" + rand.String(8),
		log: mgr.GetLogger().WithName("shard").WithValues("ring", o.Ring, "member", o.Member)}
}

// healthy fails once the member has not renewed its Lease for RenewDeadline: by then it has
// stopped working (or, if its controllers do not stop, is exiting), and a process that keeps
// answering /healthz while its peers count it gone is one to restart.
func (m *member) healthy(*http.Request) error {
	last := m.renewedAt.Load()
	if since := time.Since(time.Unix(0, last)); last != 0 && since > m.o.RenewDeadline {
		return fmt.Errorf("shard: member %s has not renewed its Lease for %s", m.o.Member, since.Round(time.Second))
	}
	return nil
}

// NeedLeaderElection: every replica is a member.
func (m *member) NeedLeaderElection() bool { return false }

// Start runs the member until ctx ends, then stops its worker and deletes its Lease, so that its
// ranges move at once. An error means it lost its Lease or could not stop its worker in time:
// the process must exit (its work has stopped, or exiting stops it).
func (m *member) Start(ctx context.Context) error {
	if m.o.Mode == Server {
		if err := checkServer(ctx, m.mgr, m.o); err != nil {
			return err
		}
	}
	return watchLeases(ctx, m.mgr, m.o.RetryPeriod, m.step, m.leave)
}

// watchLeases calls step at once, on every change of the ring's Leases and every retry period,
// until step fails or ctx ends (then done).
func watchLeases(ctx context.Context, mgr manager.Manager, every time.Duration, step func(context.Context) error, done func() error) error {
	inf, err := mgr.GetCache().GetInformer(ctx, &coordinationv1.Lease{})
	if err != nil {
		return err
	}
	wake := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: poke, DeleteFunc: poke,
		UpdateFunc: func(_, o any) { poke(o) }})
	if err != nil {
		return err
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := step(ctx); err != nil {
			return errors.Join(err, done())
		}
		select {
		case <-ctx.Done():
			return done()
		case <-wake:
		case <-tick.C:
		}
	}
}

// ringLeases lists the ring's Leases from the cache: the assignment's (nil if none) and all.
func ringLeases(ctx context.Context, mgr manager.Manager, o Options) (*coordinationv1.Lease, []coordinationv1.Lease, error) {
	var list coordinationv1.LeaseList
	if err := mgr.GetCache().List(ctx, &list, client.InNamespace(o.Namespace), client.MatchingLabels{RingLabel: o.Ring}); err != nil {
		return nil, nil, err
	}
	for i := range list.Items {
		if list.Items[i].Name == o.Ring {
			return &list.Items[i], list.Items, nil
		}
	}
	return nil, list.Items, nil
}

// step is one turn of the member: read the ring, fence itself if its Lease is lost, give up what
// it no longer has, publish, work on what it holds.
func (m *member) step(ctx context.Context) error {
	now := time.Now()
	if !m.renewed.IsZero() && now.Sub(m.renewed) > m.o.RenewDeadline {
		return fmt.Errorf("shard: member %s could not renew its Lease for %s; it stopped working", m.o.Member, now.Sub(m.renewed).Round(time.Second))
	}
	ringLease, leases, err := ringLeases(ctx, m.mgr, m.o)
	if err != nil {
		return nil // the cache answers again later; the deadline above fences a lasting failure
	}
	a, err := ReadAssignment(ringLease)
	if err != nil { // hold on to what is held, take nothing
		m.log.Error(err, "unreadable assignment")
		a = Assignment{Generation: m.published.Seen, Ranges: map[string]Set{m.o.Member: m.published.Held}}
	}
	m.live = m.alive.live(leases, m.o.Ring, now)
	var others []Member
	for name, l := range m.live {
		if name == m.o.Member {
			continue
		}
		o, err := readMember(l)
		if err != nil { // one that cannot be read may hold anything
			m.log.Error(err, "unreadable member Lease")
			o = Member{Held: All}
		}
		others = append(others, o)
	}
	next := Next(m.published.Held, a.Ranges[m.o.Member], a.Generation, others)
	if m.working&^next != 0 { // give up: stop working first
		if err := m.setWork(ctx, 0); err != nil {
			return err
		}
	}
	if next != m.published.Held || a.Generation != m.published.Seen || now.Sub(m.renewed) >= m.o.LeaseDuration/3 {
		err := m.publish(ctx, Member{Held: next, Seen: a.Generation}, now)
		if errors.Is(err, errLost) {
			return errors.Join(err, m.setWork(ctx, 0))
		}
		if err != nil && !m.renewed.IsZero() && time.Since(m.renewed) > m.o.RenewDeadline {
			return fmt.Errorf("shard: member %s could not renew its Lease for %s (%w); it stopped working", m.o.Member, time.Since(m.renewed).Round(time.Second), err)
		}
		if err != nil {
			m.log.Info("could not write the member Lease; trying again", "error", err.Error())
		}
	}
	return m.setWork(ctx, m.published.Held&next)
}

// setWork runs a worker over want, replacing the current one if it differs.
func (m *member) setWork(ctx context.Context, want Set) error {
	if want == m.working {
		return nil
	}
	if err := m.work.stop(); err != nil {
		return fmt.Errorf("shard: member %s: its controllers did not stop in time: %w", m.o.Member, err)
	}
	m.work, m.working = nil, 0
	if want == 0 {
		return nil
	}
	// Fenced RenewDeadline after its last renewal, noticed within a RetryPeriod: its controllers
	// must have stopped before the others may count it gone, LeaseDuration after that renewal.
	grace := m.o.LeaseDuration - m.o.RenewDeadline - m.o.RetryPeriod
	w, err := startWorker(ctx, m.mgr, m.o, m.o.Manager, want, grace)
	if err != nil {
		return err
	}
	m.log.Info("working", "ranges", want.Len(), "held", want.String())
	m.work, m.working = w, want
	return nil
}

// publish writes state into the member's Lease (creating or taking it over if needed), renewing
// it. It is a guarded update: a Lease changed by anyone else is read again, and one that another
// live process holds under this member's name is not taken. Its calls end by the renew deadline
// (as client-go's leader election bounds its own): a write that hangs — a stalled connection, a
// full API Priority and Fairness queue — must not keep the member from fencing itself.
func (m *member) publish(ctx context.Context, state Member, now time.Time) error {
	bound := m.o.RenewDeadline
	if !m.renewed.IsZero() {
		bound -= now.Sub(m.renewed)
	}
	if bound <= 0 {
		return context.DeadlineExceeded
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if m.lease == nil {
		l := &coordinationv1.Lease{}
		err := m.mgr.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: m.o.Namespace, Name: MemberLease(m.o.Ring, m.o.Member)}, l)
		switch {
		case apierrors.IsNotFound(err):
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: m.o.Namespace, Name: MemberLease(m.o.Ring, m.o.Member),
				Labels: map[string]string{RingLabel: m.o.Ring}}}
		case err != nil:
			return err
		case !m.renewed.IsZero() && ptr.Deref(l.Spec.HolderIdentity, "") != m.identity:
			return fmt.Errorf("%w: member %s, to %s", errLost, m.o.Member, ptr.Deref(l.Spec.HolderIdentity, ""))
		case ptr.Deref(l.Spec.HolderIdentity, "") != m.identity && m.live[m.o.Member] != nil:
			return fmt.Errorf("shard: Lease %s is held by %s, alive: is another replica named %s?", l.Name, *l.Spec.HolderIdentity, m.o.Member)
		}
		m.lease = l
	}
	l := m.lease.DeepCopy()
	l.Spec.HolderIdentity = ptr.To(m.identity)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(m.o.LeaseDuration / time.Second))
	l.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[HeldAnnotation] = state.Held.String()
	l.Annotations[SeenAnnotation] = strconv.FormatInt(state.Seen, 10)
	var err error
	if l.ResourceVersion == "" {
		err = m.mgr.GetClient().Create(ctx, l)
	} else {
		err = m.mgr.GetClient().Update(ctx, l)
	}
	if err != nil {
		m.lease = nil // read it again: a conflict, or it is gone
		return err
	}
	m.lease, m.published, m.renewed = l, state, now
	m.renewedAt.Store(now.UnixNano())
	return nil
}

// leave stops the worker and deletes the member's Lease (guarded by its UID and version): the
// coordinator gives its ranges away at once. A worker that does not stop in time keeps the Lease:
// its ranges move when it expires, after the process has exited.
func (m *member) leave() error {
	if err := m.work.stop(); err != nil {
		return fmt.Errorf("shard: member %s: its controllers did not stop in time: %w", m.o.Member, err)
	}
	m.work, m.working = nil, 0
	if m.lease == nil || m.lease.ResourceVersion == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.o.RenewDeadline)
	defer cancel()
	err := m.mgr.GetClient().Delete(ctx, m.lease, client.Preconditions{UID: &m.lease.UID, ResourceVersion: &m.lease.ResourceVersion})
	if client.IgnoreNotFound(err) != nil {
		m.log.Info("could not delete the member Lease; it expires", "error", err.Error())
	}
	return nil
}
