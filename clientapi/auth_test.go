package clientapi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7950": true, "127.3.4.5:1": true, "[::1]:7950": true, "localhost:7950": true,
		"0.0.0.0:7950": false, ":7950": false, "10.0.0.1:7950": false, "[::]:7950": false,
		"node1.example:7950": false, "127.0.0.1": true,
	} {
		require.Equal(t, want, IsLoopback(addr), addr)
	}
}

// A token goes in plaintext only to loopback addresses.
func TestBearerTokenNeedsTLSOffLoopback(t *testing.T) {
	require.False(t, BearerToken("t", "127.0.0.1:7950").RequireTransportSecurity())
	require.True(t, BearerToken("t", "10.0.0.1:7950").RequireTransportSecurity())
	md, err := BearerToken("t0k", "x:1").GetRequestMetadata(t.Context())
	require.NoError(t, err)
	require.Equal(t, map[string]string{"authorization": "Bearer t0k"}, md)
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	tok, err := ReadTokenFile(write("ok", "  abc123\n"))
	require.NoError(t, err)
	require.Equal(t, "abc123", tok)
	for name, body := range map[string]string{"empty": "", "blank": " \n\t", "two": "a b\n"} {
		_, err := ReadTokenFile(write(name, body))
		require.Error(t, err, name)
	}
	_, err = ReadTokenFile(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
