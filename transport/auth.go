package transport

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"
)

// The handshake, run on every connection right after the websocket upgrade
// and before anything else. The client speaks first:
//
//	client -> server  AuthHello      Arg=client rank, Flags=purpose, payload = nonceC (32 random bytes)
//	server -> client  AuthChallenge  Arg=server rank, payload = nonceS (32 random bytes) ||
//	                                 HMAC(secret, "orwl/v1 server" || nonceC || nonceS || ranks || purpose)
//	client -> server  AuthResponse   payload = HMAC(secret, "orwl/v1 client" || nonceC || nonceS || ranks || purpose)
//
// HMAC is HMAC-SHA256; ranks is the client rank then the server rank as
// big-endian uint32. The client checks the server's proof (an impostor
// coordinator cannot hand out a forged address book); the server checks the
// client's proof and refuses (logs, sends a close frame, closes) a client
// without the secret. Fresh nonces on both sides make a recorded exchange
// useless on another connection, and the labels keep one side's proof from
// being replayed as the other's.

const nonceSize = 32

func authMAC(secret []byte, label string, nonceC, nonceS []byte, client, server int, purpose uint8) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(label))
	mac.Write(nonceC)
	mac.Write(nonceS)
	var b [9]byte
	binary.BigEndian.PutUint32(b[0:], uint32(client))
	binary.BigEndian.PutUint32(b[4:], uint32(server))
	b[8] = purpose
	mac.Write(b[:])
	return mac.Sum(nil)
}

// authServer is the server side of the handshake without I/O: hello checks the client's
// hello and returns the challenge to send, response checks the client's proof.
type authServer struct {
	secret         []byte
	rank, size     int // this process, and the job's size
	nonceC, nonceS []byte
	client         int
	purpose        uint8
}

// hello checks the hello h with payload nonceC and returns the challenge's payload.
func (a *authServer) hello(h Header, nonceC []byte) ([]byte, error) {
	if len(nonceC) != nonceSize {
		return nil, fmt.Errorf("%w: hello of %d bytes", ErrAuth, len(nonceC))
	}
	client, purpose := h.Arg, h.Flags
	if client < 0 || client >= int64(a.size) || client == int64(a.rank) {
		return nil, fmt.Errorf("%w: rank %d is not a peer of rank %d in a job of %d", ErrAuth, client, a.rank, a.size)
	}
	switch {
	case purpose == purposeMesh:
	case purpose == purposeRegister && a.rank == 0:
	default:
		return nil, fmt.Errorf("%w: unexpected purpose %d", ErrAuth, purpose)
	}
	a.client, a.purpose, a.nonceC = int(client), purpose, nonceC
	p := make([]byte, nonceSize, nonceSize+sha256.Size)
	rand.Read(p)
	a.nonceS = p[:nonceSize]
	return append(p, authMAC(a.secret, "orwl/v1 server", a.nonceC, a.nonceS, a.client, a.rank, purpose)...), nil
}

// response checks the client's proof, after hello.
func (a *authServer) response(proof []byte) error {
	if !hmac.Equal(proof, authMAC(a.secret, "orwl/v1 client", a.nonceC, a.nonceS, a.client, a.rank, a.purpose)) {
		return fmt.Errorf("%w: wrong secret (claimed rank %d)", ErrAuth, a.client)
	}
	return nil
}

// authClient is the client side of the handshake without I/O: hello returns the hello to
// send, challenge checks the server's challenge and returns the response.
type authClient struct {
	secret       []byte
	rank, server int // this process, and the rank it expects to reach
	purpose      uint8
	nonceC       []byte
}

// hello returns the hello's header and payload.
func (a *authClient) hello() (Header, []byte) {
	a.nonceC = make([]byte, nonceSize)
	rand.Read(a.nonceC)
	return Header{Type: TypeAuthHello, Arg: int64(a.rank), Flags: a.purpose}, a.nonceC
}

// challenge checks the challenge h with payload p and returns the response's payload. It
// returns the response even when the server's proof is wrong (with the error), so that
// the server can log the mismatch too.
func (a *authClient) challenge(h Header, p []byte) ([]byte, error) {
	if len(p) != nonceSize+sha256.Size || h.Arg != int64(a.server) {
		return nil, fmt.Errorf("%w: bad challenge (server says rank %d, expected %d)", ErrAuth, h.Arg, a.server)
	}
	nonceS, proof := p[:nonceSize], p[nonceSize:]
	resp := authMAC(a.secret, "orwl/v1 client", a.nonceC, nonceS, a.rank, a.server, a.purpose)
	if !hmac.Equal(proof, authMAC(a.secret, "orwl/v1 server", a.nonceC, nonceS, a.rank, a.server, a.purpose)) {
		return resp, fmt.Errorf("%w: rank %d does not know the job secret (or the secrets differ)", ErrAuth, a.server)
	}
	return resp, nil
}

// errHandshakeTimeout is the handshake's time ending before the client answered: a busy
// client, or a busy server, not a refusal; the client tries again.
var errHandshakeTimeout = fmt.Errorf("transport: the handshake's time (%v) ended at the server before the client answered", handshakeTimeout)

// serverAuth runs the server side of the handshake on w, to be done by deadline, and returns
// the authenticated client rank and the connection's purpose. Its error is ErrAuth for a
// client it refuses, errHandshakeTimeout when the deadline passes first (see endHandshake).
func (m *Mesh) serverAuth(w *wire, deadline time.Time) (int, uint8, error) {
	w.nc.SetDeadline(deadline)
	defer w.nc.SetDeadline(time.Time{})
	a := &authServer{secret: m.cfg.Secret, rank: m.rank, size: m.size}
	h, nonceC, err := w.readMsg(TypeAuthHello, nonceSize)
	if err != nil {
		return 0, 0, handshakeFailed("reading hello", err)
	}
	p, err := a.hello(h, nonceC)
	if err != nil {
		return 0, 0, err
	}
	if err := w.writeMsg(Header{Type: TypeAuthChallenge, Arg: int64(m.rank)}, p); err != nil {
		return 0, 0, handshakeFailed("sending challenge", err)
	}
	_, proof, err := w.readMsg(TypeAuthResponse, sha256.Size)
	if err != nil {
		return 0, 0, handshakeFailed("reading response", err)
	}
	if err := a.response(proof); err != nil {
		return 0, 0, err
	}
	return a.client, a.purpose, nil
}

// handshakeFailed is the error of the server's handshake when step failed with err: its
// deadline passing is errHandshakeTimeout, anything else a refusal.
func handshakeFailed(step string, err error) error {
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return fmt.Errorf("%w: %s: %v", errHandshakeTimeout, step, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrAuth, step, err)
}

// endHandshake closes w, whose handshake failed with err, telling the client why by the
// close status: a refusal (ErrAuth), which it does not try again, or a handshake whose time
// ended (errHandshakeTimeout), which it does.
func endHandshake(w *wire, err error) {
	status := closePolicyViolation
	if errors.Is(err, errHandshakeTimeout) {
		status = closeTryAgain
	}
	w.nc.SetWriteDeadline(time.Now().Add(time.Second))
	w.writeClose(status)
	w.flush()
	w.nc.Close()
}

// clientAuth runs the client side of the handshake with serverRank on w.
func (m *Mesh) clientAuth(deadline time.Time, w *wire, serverRank int, purpose uint8) error {
	if d := time.Now().Add(handshakeTimeout); d.Before(deadline) || deadline.IsZero() {
		deadline = d
	}
	w.nc.SetDeadline(deadline)
	defer w.nc.SetDeadline(time.Time{})
	a := &authClient{secret: m.cfg.Secret, rank: m.rank, server: serverRank, purpose: purpose}
	if err := w.writeMsg(a.hello()); err != nil {
		return fmt.Errorf("sending hello to rank %d: %w", serverRank, err)
	}
	h, p, err := w.readMsg(TypeAuthChallenge, nonceSize+sha256.Size)
	if err != nil {
		return fmt.Errorf("reading challenge from rank %d: %w", serverRank, err)
	}
	resp, err := a.challenge(h, p)
	if resp == nil {
		return err
	}
	werr := w.writeMsg(Header{Type: TypeAuthResponse}, resp)
	if err != nil {
		return err
	}
	if werr != nil {
		return fmt.Errorf("sending response to rank %d: %w", serverRank, werr)
	}
	return nil
}
