//go:build !benchone || bench_raw

package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// The raw TCP baseline: frames of a 4-byte length, an 8-byte id and the
// payload, pipelined over each connection; the server echoes each frame
// from its read goroutine into a buffered writer that it flushes when no
// more input is buffered, and client callers combine their writes (the
// first one in writes what the others queue meanwhile). Both sides read
// and write their sockets with raw system calls through syscall.RawConn
// on Linux (rawIO), as minidubbo's transport does. No codec, no
// framework: the wire's limit on this machine.

const rawHeader = 12

func init() {
	register(system{name: "raw", serve: rawServe, dial: rawDial})
}

// rawMaxFrame bounds a frame's declared length.
const rawMaxFrame = 64 << 20

func rawServe(ln net.Listener) (string, string, error) {
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go rawEcho(nc)
		}
	}()
	return ln.Addr().String(), "", nil
}

func rawEcho(nc net.Conn) {
	defer nc.Close()
	sock := rawIO(nc)
	br := bufio.NewReaderSize(sock, 64<<10)
	bw := bufio.NewWriterSize(sock, 64<<10)
	var hdr [rawHeader]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		if n > rawMaxFrame {
			return
		}
		if _, err := bw.Write(hdr[:]); err != nil {
			return
		}
		if err := rawCopy(bw, br, int(n)); err != nil {
			return
		}
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return
			}
		}
	}
}

// rawCopy copies n bytes from br to bw through bw's buffer. (io.CopyN would
// call bw.ReadFrom, which, once bw's buffer has filled and been flushed in
// the middle of a payload, hands the rest to the socket's own ReadFrom: a
// fresh 32 KiB buffer and a write of a part of a frame, unbatched.)
func rawCopy(bw *bufio.Writer, br *bufio.Reader, n int) error {
	for n > 0 {
		p, err := br.Peek(min(n, br.Size()))
		if len(p) == 0 {
			return err
		}
		if _, err := bw.Write(p); err != nil {
			return err
		}
		_, _ = br.Discard(len(p))
		n -= len(p)
	}
	return nil
}

type rawClient struct {
	conns []*rawConn
	next  atomic.Uint32
}

func rawDial(ctx context.Context, addr, _ string, conns int) (caller, error) {
	c := &rawClient{}
	var d net.Dialer
	for range conns {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			c.Close()
			return nil, err
		}
		rc := &rawConn{nc: nc, sock: rawIO(nc), pending: map[uint64]chan []byte{}}
		go rc.read()
		c.conns = append(c.conns, rc)
	}
	return c, nil
}

// rawFill is how many calls a connection takes before the next calls go
// to every connection in turn: the rule of minidubbo's consumer (main
// 54e1c5a), so that both fill one connection's writes and the server's
// reads alike.
const rawFill = 16

// Call sends req on the first connection with fewer than rawFill calls in
// flight, or, when all have that many, on the next in turn.
func (c *rawClient) Call(ctx context.Context, req []byte) ([]byte, error) {
	for _, rc := range c.conns {
		if rc.inflight.Load() < rawFill {
			return rc.call(ctx, req)
		}
	}
	return c.conns[int(c.next.Add(1))%len(c.conns)].call(ctx, req)
}

func (c *rawClient) Close() error {
	for _, rc := range c.conns {
		rc.nc.Close()
	}
	return nil
}

type rawConn struct {
	nc       net.Conn
	sock     io.ReadWriter // nc's socket I/O (rawIO)
	nextID   atomic.Uint64
	inflight atomic.Int32 // calls sent and not yet ended

	wmu      sync.Mutex
	wbuf     []byte
	spare    []byte
	flushing bool

	pmu     sync.Mutex
	pending map[uint64]chan []byte
	err     error
}

var rawChans = sync.Pool{New: func() any { return make(chan []byte, 1) }}

func (rc *rawConn) call(ctx context.Context, req []byte) ([]byte, error) {
	rc.inflight.Add(1)
	defer rc.inflight.Add(-1)
	id := rc.nextID.Add(1)
	ch := rawChans.Get().(chan []byte)
	rc.pmu.Lock()
	if rc.err != nil {
		rc.pmu.Unlock()
		return nil, rc.err
	}
	rc.pending[id] = ch
	rc.pmu.Unlock()
	if err := rc.send(id, req); err != nil {
		return nil, err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, errors.New("raw: connection lost")
		}
		rawChans.Put(ch)
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// send appends the frame to the write buffer; the caller that finds no
// write in progress writes, taking whatever others append meanwhile.
func (rc *rawConn) send(id uint64, req []byte) error {
	rc.wmu.Lock()
	rc.wbuf = binary.BigEndian.AppendUint32(rc.wbuf, uint32(len(req)))
	rc.wbuf = binary.BigEndian.AppendUint64(rc.wbuf, id)
	rc.wbuf = append(rc.wbuf, req...)
	if rc.flushing {
		rc.wmu.Unlock()
		return nil
	}
	rc.flushing = true
	for {
		buf := rc.wbuf
		rc.wbuf = rc.spare[:0]
		rc.wmu.Unlock()
		_, err := rc.sock.Write(buf)
		rc.wmu.Lock()
		rc.spare = buf[:0]
		if err != nil || len(rc.wbuf) == 0 {
			rc.flushing = false
			rc.wmu.Unlock()
			return err
		}
	}
}

func (rc *rawConn) read() {
	br := bufio.NewReaderSize(rc.sock, 64<<10)
	var hdr [rawHeader]byte
	var err error
	for {
		if _, err = io.ReadFull(br, hdr[:]); err != nil {
			break
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		if n > rawMaxFrame {
			err = fmt.Errorf("raw: frame of %d bytes", n)
			break
		}
		b := make([]byte, n)
		if _, err = io.ReadFull(br, b); err != nil {
			break
		}
		id := binary.BigEndian.Uint64(hdr[4:])
		rc.pmu.Lock()
		ch := rc.pending[id]
		delete(rc.pending, id)
		rc.pmu.Unlock()
		if ch != nil {
			ch <- b
		}
	}
	rc.pmu.Lock()
	rc.err = fmt.Errorf("raw: connection lost: %w", err)
	for id, ch := range rc.pending {
		close(ch)
		delete(rc.pending, id)
	}
	rc.pmu.Unlock()
}
