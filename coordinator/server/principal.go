package server

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"strings"
)

// certPrincipal is the principal of a client certificate, as Kafka's
// DefaultKafkaPrincipalBuilder makes it with the default
// ssl.principal.mapping.rules: "User:" and the subject's distinguished
// name in RFC 2253 form, as Java's X500Principal.getName() writes it:
// most specific first ("User:CN=alice,OU=eng,O=acme,C=US"), the attribute
// types Java names by keyword (CN, C, L, ST, O, OU, STREET, DC, UID) by
// keyword and every other one by OID with its value as #hex DER.
func certPrincipal(cert *x509.Certificate) string {
	return "User:" + rfc2253(cert.Subject.ToRDNSequence())
}

// rfc2253Keywords are the attribute types Java's RFC 2253 output names by
// keyword (sun.security.x509.AVAKeyword, RFC2253 standard).
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// rfc2253 writes rdns last to first, as RFC 2253 orders a name, the
// attributes of a multi-valued RDN joined by '+'.
func rfc2253(rdns pkix.RDNSequence) string {
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		if i < len(rdns)-1 {
			b.WriteByte(',')
		}
		for j, atv := range rdns[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			oid := atv.Type.String()
			s, isString := atv.Value.(string)
			if kw, ok := rfc2253Keywords[oid]; ok && isString {
				b.WriteString(kw)
				b.WriteByte('=')
				b.WriteString(escapeRFC2253(s))
				continue
			}
			b.WriteString(oid)
			b.WriteByte('=')
			der, err := asn1.Marshal(atv.Value)
			if err != nil {
				continue // a value Go decoded cannot fail to encode again
			}
			b.WriteByte('#')
			b.WriteString(strings.ToUpper(hex.EncodeToString(der)))
		}
	}
	return b.String()
}

// escapeRFC2253 escapes a value as RFC 2253 section 2.4 asks: the special
// characters, a leading '#' or space and a trailing space get a
// backslash.
func escapeRFC2253(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case strings.IndexByte(`,+"\<>;`, c) >= 0,
			i == 0 && (c == '#' || c == ' '),
			i == len(s)-1 && c == ' ':
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
