package api

import (
	"reflect"
	"strings"
	"sync"
)

// structFields is the decoding table of a request struct.
type structFields struct {
	byName map[string]int // JSON name → position in index
	index  []int          // position → struct field index
}

var fieldCache sync.Map // reflect.Type → *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{byName: map[string]int{}}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f.byName[name] = len(f.index)
		f.index = append(f.index, i)
	}
	if len(f.index) > 64 {
		panic("api: request struct " + t.String() + " has more than 64 fields")
	}
	fieldCache.Store(t, f)
	return f
}
