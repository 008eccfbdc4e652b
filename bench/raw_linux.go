//go:build (!benchone || bench_raw) && linux

package main

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// sockIO reads and writes a TCP connection's socket with plain read(2) and
// write(2) made through syscall.RawConn and syscall.RawSyscall. The socket
// is non-blocking: when it would block, RawConn's Read or Write parks the
// goroutine on the runtime's poller and calls again once it is ready. A
// net.Conn's Read and Write go through syscall.Syscall instead, whose
// entersyscall wakes the runtime's sysmon thread when it sleeps (at one
// caller, on nearly every request) and lets sysmon hand the P away during a
// long copy. minidubbo's transport does its socket I/O this way on Linux
// since main aa980f8; raw TCP, the limit a Go program can reach on this
// wire, does too.
//
// One goroutine at a time reads, and one at a time writes (the server's
// echo loop does both; a client's reader reads and the caller holding its
// flushing role writes): each direction has its own state.
type sockIO struct {
	rc syscall.RawConn

	rp      []byte
	rn      int
	rerr    error
	readFn  func(fd uintptr) bool
	wp      []byte
	wn      int
	werr    error
	writeFn func(fd uintptr) bool
}

// rawIO is nc's socket I/O through sockIO when nc is a TCP connection,
// else nc itself.
func rawIO(nc net.Conn) io.ReadWriter {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	s := &sockIO{rc: rc}
	s.readFn, s.writeFn = s.readOnce, s.writeAll // bound once: no closure per call
	return s
}

func (s *sockIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rp, s.rn, s.rerr = p, 0, nil
	err := s.rc.Read(s.readFn)
	n := s.rn
	if err == nil {
		err = s.rerr
	}
	s.rp, s.rerr = nil, nil
	if n == 0 && err == nil {
		return 0, io.EOF
	}
	return n, err
}

// readOnce makes one read(2) into s.rp; false (wait for input) when the
// socket has none.
func (s *sockIO) readOnce(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.rp[0])), uintptr(len(s.rp)))
		switch e {
		case 0:
			s.rn = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			s.rerr = e
			return true
		}
	}
}

func (s *sockIO) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.wp, s.wn, s.werr = p, 0, nil
	err := s.rc.Write(s.writeFn)
	n := s.wn
	if err == nil {
		err = s.werr
	}
	s.wp, s.werr = nil, nil
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	return n, err
}

// writeAll writes s.wp from s.wn on with write(2) until all is written or
// an error; false (wait until writable) when the socket's buffer is full.
func (s *sockIO) writeAll(fd uintptr) bool {
	for s.wn < len(s.wp) {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&s.wp[s.wn])), uintptr(len(s.wp)-s.wn))
		switch e {
		case 0:
			s.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			s.werr = e
			return true
		}
	}
	return true
}
