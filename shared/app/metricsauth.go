// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsAuth authenticates /metrics callers with a TokenReview and authorizes them with a
// SubjectAccessReview, both cached, as controller-runtime's filters.WithAuthenticationAndAuthorization
// does, with one difference: a token the review does not accept is answered 401 Unauthorized,
// and such failures are logged at most once a minute. controller-runtime v0.25 answers it 500
// and logs an error with its stack for every request, so a scraper with a wrong token fills the
// log. (A review that fails because the API server is away is a 401 too: the caller is not
// authenticated, and the line says why.)
func metricsAuth(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	backoff := &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5} // the API server's own
	authenticator, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous: &apiserver.AnonymousAuthConfig{Enabled: false}, CacheTTL: time.Minute,
		TokenAccessReviewClient: authn, TokenAccessReviewTimeout: 10 * time.Second, WebhookRetryBackoff: backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("metrics authentication: %w", err)
	}
	authorize, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authz, AllowCacheTTL: 5 * time.Minute, DenyCacheTTL: 30 * time.Second, WebhookRetryBackoff: backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("metrics authorization: %w", err)
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		var lastLogged atomic.Int64
		sometimes := func(msg string, keysAndValues ...any) {
			now, last := time.Now().UnixNano(), lastLogged.Load()
			if now-last >= int64(time.Minute) && lastLogged.CompareAndSwap(last, now) {
				log.Info(msg+" (logged at most once a minute)", keysAndValues...)
			}
		}
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			res, ok, err := authenticator.AuthenticateRequest(req)
			if err != nil || !ok {
				if err != nil {
					sometimes("metrics request not authenticated", "remote", req.RemoteAddr, "reason", err.Error())
				}
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			attrs := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(req.Method), Path: req.URL.Path}
			decision, reason, err := authorize.Authorize(req.Context(), attrs)
			if err != nil {
				sometimes("metrics request not authorized: the review failed", "user", res.User.GetName(), "reason", err.Error())
				http.Error(w, "Authorization failed", http.StatusInternalServerError)
				return
			}
			if decision != authorizer.DecisionAllow {
				log.V(4).Info("metrics request forbidden", "user", res.User.GetName(), "reason", reason)
				http.Error(w, "Forbidden", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, req)
		}), nil
	}, nil
}
