// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package postgres starts a throwaway PostgreSQL server for tests, the demo and benchmarks: the
// OS's own server (Debian's postgresql package, installed with apt-get when missing, as root), in
// a new temporary data directory, on a free port, run as an unprivileged user when the caller is
// root (the server refuses to run as root). Nothing here is used by a pattern's own code.
package postgres

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// Server is a running (or stopped) PostgreSQL server with one superuser, postgres, whose
// password is Password.
type Server struct {
	Dir      string // the data directory's parent; the server's log is Dir/postgres.log
	Host     string // the first address it listens on
	Port     int
	Password string

	listen []string
	bin    string
	cred   *syscall.Credential
	cmd    *exec.Cmd
	exited chan struct{}
}

// User is the server's superuser.
const User = "postgres"

// Start initialises a new server and starts it, listening on 127.0.0.1 and on the extra
// addresses given (a host address a Pod can reach, for example). Stop it with Stop; Remove deletes
// its files.
func Start(extraListen ...string) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kpatterns-postgres-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, Host: "127.0.0.1", listen: append([]string{"127.0.0.1"}, extraListen...), bin: bin}
	if err := s.init(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := s.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// binDir finds the newest server in Debian's layout (/usr/lib/postgresql/<major>/bin), installing
// the postgresql package first when there is none.
func binDir() (string, error) {
	find := func() string {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
		slices.SortFunc(dirs, func(a, b string) int { return version(a) - version(b) })
		if len(dirs) == 0 {
			return ""
		}
		return filepath.Dir(dirs[len(dirs)-1])
	}
	if d := find(); d != "" {
		return d, nil
	}
	if err := controlplane.EnsurePackage("postgresql", "/usr/lib/postgresql"); err != nil {
		return "", err
	}
	if d := find(); d != "" {
		return d, nil
	}
	return "", errors.New("postgresql is installed but no /usr/lib/postgresql/<major>/bin/postgres was found")
}

func version(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

// init runs initdb with password authentication for every connection, and the user to run as.
func (s *Server) init() error {
	var secret [16]byte
	_, _ = rand.Read(secret[:])
	s.Password = hex.EncodeToString(secret[:])
	if os.Geteuid() == 0 { // postgres refuses root: run as nobody, owning the directory
		u, err := user.Lookup("nobody")
		if err != nil {
			return err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(s.Dir, uid, gid); err != nil {
			return err
		}
	}
	pwfile := filepath.Join(s.Dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.Password+"\n"), 0o600); err != nil {
		return err
	}
	if s.cred != nil {
		if err := os.Chown(pwfile, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return err
		}
	}
	cmd := exec.Command(filepath.Join(s.bin, "initdb"), "-D", s.data(), "-U", User, "--pwfile", pwfile,
		"--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, out)
	}
	_ = os.Remove(pwfile)
	// Any address may connect with the password; the server only listens where Start says.
	hba, err := os.OpenFile(filepath.Join(s.data(), "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer func() { _ = hba.Close() }()
	_, err = fmt.Fprintln(hba, "host all all 0.0.0.0/0 scram-sha-256")
	return err
}

func (s *Server) data() string { return filepath.Join(s.Dir, "data") }

// Log is the server's log file.
func (s *Server) Log() string { return filepath.Join(s.Dir, "postgres.log") }

// Start starts the server (again, after Stop or Kill) on its port, a free one the first time, and
// waits until it accepts connections.
func (s *Server) Start() error {
	if s.Port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		s.Port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	log, err := os.OpenFile(s.Log(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	start, _ := log.Seek(0, 2)
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.data(), "-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses="+strings.Join(s.listen, ","), "-c", "unix_socket_directories="+s.Dir,
		"-c", "lc_messages=C", "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, and killed with the process that started it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(s.exited) }()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(s.Log())
		if int64(len(b)) > start && strings.Contains(string(b[start:]), "ready to accept connections") {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited at start: %s", b[start:])
		default:
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("postgres not ready after a minute: %s", b[start:])
		}
	}
}

// Stop shuts the server down (fast shutdown: connections are closed) and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.Kill()
	}
	s.cmd = nil
}

// Kill kills the server and its processes at once, as a crash would.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
}

// Remove stops the server and deletes its files.
func (s *Server) Remove() error {
	s.Stop()
	return os.RemoveAll(s.Dir)
}

// URL is the superuser's connection URL to database db on host (empty: s.Host).
func (s *Server) URL(host, db string) string {
	if host == "" {
		host = s.Host
	}
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", User, s.Password, net.JoinHostPort(host, strconv.Itoa(s.Port)), db)
}
