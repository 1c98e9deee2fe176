package transport

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
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

// serverAuth runs the server side of the handshake and returns the
// authenticated client rank and the connection's purpose.
func (m *Mesh) serverAuth(w *wire) (int, uint8, error) {
	deadline := time.Now().Add(handshakeTimeout)
	w.nc.SetDeadline(deadline)
	defer w.nc.SetDeadline(time.Time{})
	h, nonceC, err := w.readMsg(TypeAuthHello, nonceSize)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: reading hello: %v", ErrAuth, err)
	}
	if len(nonceC) != nonceSize {
		return 0, 0, fmt.Errorf("%w: hello of %d bytes", ErrAuth, len(nonceC))
	}
	client, purpose := h.Arg, h.Flags
	if client < 0 || client >= int64(m.size) || client == int64(m.rank) {
		return 0, 0, fmt.Errorf("%w: rank %d is not a peer of rank %d in a job of %d", ErrAuth, client, m.rank, m.size)
	}
	switch {
	case purpose == purposeMesh:
	case purpose == purposeRegister && m.rank == 0:
	default:
		return 0, 0, fmt.Errorf("%w: unexpected purpose %d", ErrAuth, purpose)
	}
	p := make([]byte, nonceSize, nonceSize+sha256.Size)
	rand.Read(p)
	nonceS := p[:nonceSize]
	p = append(p, authMAC(m.cfg.Secret, "orwl/v1 server", nonceC, nonceS, int(client), m.rank, purpose)...)
	if err := w.writeMsg(Header{Type: TypeAuthChallenge, Arg: int64(m.rank)}, p); err != nil {
		return 0, 0, fmt.Errorf("%w: sending challenge: %v", ErrAuth, err)
	}
	_, proof, err := w.readMsg(TypeAuthResponse, sha256.Size)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: reading response: %v", ErrAuth, err)
	}
	if !hmac.Equal(proof, authMAC(m.cfg.Secret, "orwl/v1 client", nonceC, nonceS, int(client), m.rank, purpose)) {
		return 0, 0, fmt.Errorf("%w: wrong secret (claimed rank %d)", ErrAuth, client)
	}
	return int(client), purpose, nil
}

// clientAuth runs the client side of the handshake with serverRank.
func (m *Mesh) clientAuth(deadline time.Time, w *wire, serverRank int, purpose uint8) error {
	if d := time.Now().Add(handshakeTimeout); d.Before(deadline) || deadline.IsZero() {
		deadline = d
	}
	w.nc.SetDeadline(deadline)
	defer w.nc.SetDeadline(time.Time{})
	nonceC := make([]byte, nonceSize)
	rand.Read(nonceC)
	if err := w.writeMsg(Header{Type: TypeAuthHello, Arg: int64(m.rank), Flags: purpose}, nonceC); err != nil {
		return fmt.Errorf("sending hello to rank %d: %w", serverRank, err)
	}
	h, p, err := w.readMsg(TypeAuthChallenge, nonceSize+sha256.Size)
	if err != nil {
		return fmt.Errorf("reading challenge from rank %d: %w", serverRank, err)
	}
	if len(p) != nonceSize+sha256.Size || h.Arg != int64(serverRank) {
		return fmt.Errorf("%w: bad challenge (server says rank %d, expected %d)", ErrAuth, h.Arg, serverRank)
	}
	nonceS, proof := p[:nonceSize], p[nonceSize:]
	// Answer even when the server's proof is wrong, so that the server
	// can log the mismatch too.
	werr := w.writeMsg(Header{Type: TypeAuthResponse}, authMAC(m.cfg.Secret, "orwl/v1 client", nonceC, nonceS, m.rank, serverRank, purpose))
	if !hmac.Equal(proof, authMAC(m.cfg.Secret, "orwl/v1 server", nonceC, nonceS, m.rank, serverRank, purpose)) {
		return fmt.Errorf("%w: rank %d does not know the job secret (or the secrets differ)", ErrAuth, serverRank)
	}
	if werr != nil {
		return fmt.Errorf("sending response to rank %d: %w", serverRank, werr)
	}
	return nil
}
