// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long the metrics filter remembers a review's answer: controller-runtime's filter's TTLs.
const (
	tokenTTL, rejectedTokenTTL = time.Minute, time.Minute
	allowTTL, denyTTL          = 5 * time.Minute, 30 * time.Second
	reviewTimeout              = 10 * time.Second
)

// metricsAuth authenticates /metrics callers with a TokenReview and authorizes them with a
// SubjectAccessReview (get on the path, a non-resource URL), both cached — what
// controller-runtime's filters.WithAuthenticationAndAuthorization does, built on client-go's
// review clients alone. Two choices differ from it: a token the review does not accept is 401
// Unauthorized (controller-runtime v0.25 answers 500 and logs an error with its stack for every
// request), and failures are logged at most once a minute, so a scraper with a wrong token does not
// fill the log. And it does not link k8s.io/apiserver, whose delegating authenticator brings
// cel-go, gRPC and OpenTelemetry into every pattern's binary, whose pages count in its RSS.
func metricsAuth(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	a := &reviewer{tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews(),
		users: cache.NewLRUExpireCache(1024), decisions: cache.NewLRUExpireCache(1024)}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		var lastLogged atomic.Int64
		sometimes := func(msg string, keysAndValues ...any) {
			now, last := time.Now().UnixNano(), lastLogged.Load()
			if now-last >= int64(time.Minute) && lastLogged.CompareAndSwap(last, now) {
				log.Info(msg+" (logged at most once a minute)", keysAndValues...)
			}
		}
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			user, err := a.authenticate(req)
			if err != nil {
				if !errors.Is(err, errNoToken) {
					sometimes("metrics request not authenticated", "remote", req.RemoteAddr, "reason", err.Error())
				}
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			allowed, reason, err := a.authorize(req, user)
			if err != nil {
				sometimes("metrics request not authorized: the review failed", "user", user.Username, "reason", err.Error())
				http.Error(w, "Authorization failed", http.StatusInternalServerError)
				return
			}
			if !allowed {
				log.V(4).Info("metrics request forbidden", "user", user.Username, "reason", reason)
				http.Error(w, "Forbidden", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, req)
		}), nil
	}, nil
}

var errNoToken = errors.New("no bearer token")

// reviewer asks the API server who a token is and what it may do, and remembers the answers.
type reviewer struct {
	tokens    authenticationv1.TokenReviewInterface
	access    authorizationv1.SubjectAccessReviewInterface
	users     *cache.LRUExpireCache // sha256 of the token → authnv1.UserInfo, or a rejection error
	decisions *cache.LRUExpireCache // the review's spec (JSON) → decision
}

// decision is a SubjectAccessReview's answer.
type decision struct {
	allowed bool
	reason  string
}

// authenticate is the user of the request's bearer token. A review that fails (the API server is
// away) is an error too, and is not remembered.
func (a *reviewer) authenticate(req *http.Request) (authnv1.UserInfo, error) {
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if token = strings.TrimSpace(token); !ok || token == "" {
		return authnv1.UserInfo{}, errNoToken
	}
	key := sha256.Sum256([]byte(token)) // the cache holds no token
	if v, ok := a.users.Get(key); ok {
		if err, rejected := v.(error); rejected {
			return authnv1.UserInfo{}, err
		}
		return v.(authnv1.UserInfo), nil
	}
	ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
	defer cancel()
	r, err := a.tokens.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return authnv1.UserInfo{}, err
	}
	if !r.Status.Authenticated {
		err := errors.New("token not accepted")
		if r.Status.Error != "" {
			err = errors.New(r.Status.Error)
		}
		a.users.Add(key, err, rejectedTokenTTL)
		return authnv1.UserInfo{}, err
	}
	a.users.Add(key, r.Status.User, tokenTTL)
	return r.Status.User, nil
}

// authorize asks whether user may use the request's method (lower case, as the API server's
// non-resource verbs) on its path.
func (a *reviewer) authorize(req *http.Request, user authnv1.UserInfo) (bool, string, error) {
	verb, path := strings.ToLower(req.Method), req.URL.Path
	extra := make(map[string]authzv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	spec := authzv1.SubjectAccessReviewSpec{User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb}}
	// The key is the whole review asked: every attribute an authorizer may decide on (a scoped
	// token's extra attributes among them), each unambiguous (JSON; maps in key order).
	b, err := json.Marshal(spec)
	if err != nil {
		return false, "", err
	}
	key := string(b)
	if v, ok := a.decisions.Get(key); ok {
		d := v.(decision)
		return d.allowed, d.reason, nil
	}
	ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
	defer cancel()
	r, err := a.access.Create(ctx, &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	d := decision{allowed: r.Status.Allowed && !r.Status.Denied, reason: r.Status.Reason}
	ttl := allowTTL
	if !d.allowed {
		ttl = denyTTL
	}
	a.decisions.Add(key, d, ttl)
	return d.allowed, d.reason, nil
}
