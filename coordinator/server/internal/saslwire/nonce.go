package saslwire

import (
	"crypto/hmac"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// librdkafka up to 2.x writes its client nonce before the nonce the
// server answered, which already begins with it: its client-final
// message's r= is client nonce + server nonce, not the server nonce.
// Kafka's ScramSaslServer accepts a client-final nonce that ends with the
// server's (and computes the proof over the message as sent), so
// librdkafka's clients authenticate there; xdg-go/scram wants it exactly.
// finalPrefixedNonce does Kafka's check for that one case: the client
// proves the password over AuthMessage = client-first-bare, server-first,
// client-final-without-proof, as RFC 5802 defines it, whatever the nonce
// it repeats. It returns the server-final message, or ok false.
func (x *Exchange) finalPrefixedNonce(msg string) (reply string, ok bool) {
	withoutProof, proofB64, found := strings.Cut(msg, ",p=")
	if !found || strings.Contains(proofB64, ",") {
		return "", false
	}
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) != 2 || attrs[0] != "c=biws" || !strings.HasPrefix(attrs[1], "r=") {
		return "", false
	}
	nonce := strings.TrimPrefix(attrs[1], "r=")
	// The server's nonce is the client's and the server's: a nonce that
	// ends with it and adds exactly the client's nonce before it.
	if !strings.HasSuffix(nonce, x.serverNonce) || nonce != x.clientNonce+x.serverNonce {
		return "", false
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || x.cred == nil {
		return "", false
	}
	authMessage := x.clientFirstBare + "," + x.serverFirst + "," + withoutProof
	mac := func(key []byte) []byte {
		m := hmac.New(x.hash, key)
		m.Write([]byte(authMessage))
		return m.Sum(nil)
	}
	clientSig := mac(x.cred.StoredKey)
	if len(proof) != len(clientSig) {
		return "", false
	}
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ clientSig[i]
	}
	h := x.hash()
	h.Write(clientKey)
	if subtle.ConstantTimeCompare(h.Sum(nil), x.cred.StoredKey) != 1 {
		return "", false
	}
	return "v=" + base64.StdEncoding.EncodeToString(mac(x.cred.ServerKey)), true
}

// first remembers what the first step needs for finalPrefixedNonce: the
// client-first message without its GS2 header, the server-first message
// and both nonces.
func (x *Exchange) first(clientFirst, serverFirst string) {
	_, bare, ok := strings.Cut(clientFirst, ",")
	if !ok {
		return
	}
	if _, bare, ok = strings.Cut(bare, ","); !ok {
		return
	}
	x.clientFirstBare, x.serverFirst = bare, serverFirst
	x.clientNonce = attr(bare, "r")
	x.serverNonce = attr(serverFirst, "r")
}

// attr is the value of the SCRAM attribute name in msg, or "".
func attr(msg, name string) string {
	for _, a := range strings.Split(msg, ",") {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}
