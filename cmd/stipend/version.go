package main

import "runtime/debug"

// Version is the release version, set at build time with
// -ldflags "-X main.Version=v1.2.3". Empty means: use the build info.
var Version string

// version returns Version, or the module version and VCS revision Go
// recorded in the binary.
func version() string {
	if Version != "" {
		return Version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " (" + s.Value[:12] + ")"
		}
	}
	return v
}
