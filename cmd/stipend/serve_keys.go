package main

import (
	"errors"
	"fmt"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/receipt"
)

// apiKeys loads the API key file, or in development without one makes a key
// per role (kept in m.DevKeys; writeDevKeys saves them once the listener is up).
func (m *Main) apiKeys() (*apikey.Set, error) {
	c := m.Config
	if c.APIKeysFile != "" {
		set, err := apikey.Load(c.APIKeysFile)
		if err != nil {
			return nil, fmt.Errorf("api key file: %w", err)
		}
		if set.Len() == 0 {
			return nil, fmt.Errorf("api key file %s: holds no keys", c.APIKeysFile)
		}
		m.Logger.Info("api keys loaded", "file", c.APIKeysFile, "keys", set.Len())
		return set, nil
	}
	if !c.Development() {
		return nil, errors.New("production needs an API key file (--api-keys-file)")
	}
	dev, set, err := NewDevKeys()
	if err != nil {
		return nil, fmt.Errorf("development keys: %w", err)
	}
	m.DevKeys = dev
	return set, nil
}

// writeDevKeys writes the development keys to Config.DevKeysOut, when set.
// Run calls it only once the listener is open: a second server that cannot
// bind its port must not replace the keys the first one accepts.
func (m *Main) writeDevKeys() error {
	if m.DevKeys == nil || m.Config.DevKeysOut == "" {
		return nil
	}
	if err := m.DevKeys.WriteFile(m.Config.DevKeysOut); err != nil {
		return fmt.Errorf("--dev-keys-out: %w", err)
	}
	return nil
}

// signer loads the receipt signing keys, or in development without any
// makes an ephemeral one.
func (m *Main) signer() (*receipt.Keyring, error) {
	c := m.Config
	if len(c.SigningKeyFiles) > 0 {
		k, err := receipt.LoadKeyFiles(c.SigningKeyFiles...)
		if err != nil {
			return nil, fmt.Errorf("signing key files: %w", err)
		}
		m.Logger.Info("receipt signing keys loaded", "kid", k.KeyID(), "files", len(c.SigningKeyFiles))
		return k, nil
	}
	if !c.Development() {
		return nil, errors.New("production needs a receipt signing key (--signing-key-file)")
	}
	return receipt.NewEphemeralKeyring()
}
