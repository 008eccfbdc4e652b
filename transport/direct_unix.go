//go:build unix

package transport

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
)

// directWrite makes SendNow's one write to the socket without waiting for
// it to have room. Only the goroutine that set Conn.writing uses it; its
// function value is made once, so a write allocates nothing.
type directWrite struct {
	raw syscall.RawConn
	fn  func(fd uintptr) bool
	b   []byte
	n   int
	err error

	fnv func(fd uintptr) bool // writev's (Linux)
	iov []syscall.Iovec

	// The writer goroutine's writes of whole batches (writeBuffers, Linux).
	all    [][]byte
	allIov []syscall.Iovec
	allErr syscall.Errno
	allFn  func(fd uintptr) bool
	// beforeWait, when set, is called once with what is left of the
	// batch before writeBuffers first waits for room (where waitHook).
	beforeWait func(rest [][]byte)
	// sent counts the writes of writeBuffers that took bytes (Linux),
	// for the budget's reclaimer: a large batch to a slow reader
	// progresses before it is all written.
	sent atomic.Uint64
}

func newDirectWrite(nc net.Conn) *directWrite {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil || !nonblocking(raw) {
		return nil
	}
	d := &directWrite{raw: raw}
	d.fn = d.once
	d.fnv = d.vfn()
	d.allFn = d.afn()
	return d
}

func (d *directWrite) once(fd uintptr) bool {
	for {
		n, err := writeFD(fd, d.b)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if n < 0 {
			n = 0
		}
		d.n, d.err = n, err
		return true // done, whatever the socket took
	}
}

// write writes what the socket takes of b now and returns how much; a
// full socket is not an error.
func (d *directWrite) write(b []byte) (int, error) {
	d.b = b
	err := d.raw.Write(d.fn)
	n, werr := d.n, d.err
	d.b, d.err = nil, nil
	if err != nil {
		return 0, err
	}
	if werr != nil && !errors.Is(werr, syscall.EAGAIN) {
		return n, werr
	}
	return n, nil
}

// nonblocking reports whether the socket behind raw is in non-blocking
// mode, as Go's net package leaves every socket it makes (dialled,
// accepted, TCP or Unix). The raw reads and writes rely on it: they are
// made without the runtime's syscall bookkeeping (Linux), so one that
// waited in the kernel would keep its P, and the next stop-the-world
// (every GC cycle) would wait for it, stalling the whole process for as
// long as the peer sends nothing. A socket is blocking only when its
// owner made it so (os.File.Fd on the dup File returns shares the mode,
// for example); such a connection is read and written through net.Conn.
// The mode is read once, when the connection is wrapped.
func nonblocking(raw syscall.RawConn) bool {
	nb := false
	err := raw.Control(func(fd uintptr) {
		fl, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		nb = e == 0 && fl&syscall.O_NONBLOCK != 0
	})
	return err == nil && nb
}
