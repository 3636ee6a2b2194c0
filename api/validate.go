package api

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/go-playground/validator/v10"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/problem"
)

// limitTags are the validator tags of limits that their own packages
// define, so that a tag refers to the limit instead of writing its number
// again: `validate:"required,name"`.
var limitTags = map[string]struct {
	valid   func(reflect.Value) bool
	message string
}{
	// name is an agent, service, tool or entitlement ID.
	"name": {
		func(v reflect.Value) bool { return entitlement.ValidName(v.String()) },
		fmt.Sprintf("must be 1–%d printable ASCII characters", entitlement.MaxNameLen),
	},
	// idempotencykey is a consume request's idempotency key.
	"idempotencykey": {
		func(v reflect.Value) bool { return entitlement.ValidIdempotencyKey(v.String()) },
		fmt.Sprintf("must be 1–%d printable ASCII characters", entitlement.MaxKeyLength),
	},
	// units is a consume request's units (an omitted member stands for 1).
	"units": {
		func(v reflect.Value) bool { return validUnits(v.Int()) },
		fmt.Sprintf("must be between 1 and %d", entitlement.MaxUnits),
	},
	// holdttl is a hold's ttlSeconds; 0 stands for entitlement.DefaultHoldTTL.
	"holdttl": {
		func(v reflect.Value) bool {
			return v.Int() >= 0 && v.Int() <= int64(entitlement.MaxHoldTTL/time.Second)
		},
		fmt.Sprintf("must be between 1 and %d", int64(entitlement.MaxHoldTTL/time.Second)),
	},
	// quotalimit is a grant's limit; 0 stands for none.
	"quotalimit": {
		func(v reflect.Value) bool { return v.Int() >= 0 && v.Int() <= MaxQuotaLimit },
		fmt.Sprintf("must be between 0 and %d", MaxQuotaLimit),
	},
}

// validUnits is the units tag's rule.
func validUnits(n int64) bool { return n >= 1 && n <= entitlement.MaxUnits }

// newValidator returns a validator that names fields by their JSON names
// (an embedded struct adds no name, as its fields are the parent's in JSON)
// and knows limitTags.
func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled(), validator.WithTagNameFuncBlankOmit())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name != "" && name != "-":
			return name
		case f.Anonymous:
			return ""
		}
		return f.Name
	})
	for tag, t := range limitTags {
		valid := t.valid
		if err := v.RegisterValidation(tag, func(fl validator.FieldLevel) bool { return valid(fl.Field()) }); err != nil {
			panic("api: registering validator tag " + tag + ": " + err.Error())
		}
	}
	return v
}

// check runs validator tags on dst, then its own Validate method if it has
// one; failures are 400 naming every field.
func (s *Server) check(dst any) error {
	if err := s.validate.Struct(dst); err != nil {
		var ve validator.ValidationErrors
		if !errors.As(err, &ve) {
			return Invalid("", err.Error())
		}
		out := &Error{Status: 400, Kind: problem.InvalidRequest}
		for _, fe := range ve {
			out.Errors = append(out.Errors, problem.FieldError{Field: fieldPath(fe.Namespace()), Detail: tagMessage(fe)})
		}
		out.Detail = "the request is invalid: " + joinField(out.Errors[0].Field, out.Errors[0].Detail)
		return out
	}
	return validateMethod(dst)
}

// validateMethod runs dst's own Validate method, if it has one.
func validateMethod(dst any) error {
	if v, ok := dst.(interface{ Validate() error }); ok {
		return fieldErrorOf(v.Validate())
	}
	return nil
}

// fieldErrorOf turns the field errors of the domain packages into a 400.
func fieldErrorOf(err error) error {
	if err == nil {
		return nil
	}
	var fe *field.Error
	if errors.As(err, &fe) {
		return Invalid(fe.Field, fe.Reason)
	}
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	return Invalid("", err.Error())
}

// fieldPath drops the struct name validator puts first: "consumeBody.cost.cents" → "cost.cents".
func fieldPath(ns string) string {
	_, rest, ok := strings.Cut(ns, ".")
	if !ok {
		return ns
	}
	return rest
}

func tagMessage(fe validator.FieldError) string {
	if t, ok := limitTags[fe.Tag()]; ok {
		return t.message
	}
	switch fe.Tag() {
	case "required":
		return "is required"
	case "max":
		if fe.Kind() == reflect.String {
			return fmt.Sprintf("must be at most %s characters", fe.Param())
		}
		if fe.Kind() == reflect.Slice || fe.Kind() == reflect.Map {
			return fmt.Sprintf("must have at most %s entries", fe.Param())
		}
		return fmt.Sprintf("must be at most %s", fe.Param())
	case "min":
		if fe.Kind() == reflect.String {
			return fmt.Sprintf("must be at least %s characters", fe.Param())
		}
		return fmt.Sprintf("must be at least %s", fe.Param())
	case "gte":
		return fmt.Sprintf("must be at least %s", fe.Param())
	case "lte":
		return fmt.Sprintf("must be at most %s", fe.Param())
	case "oneof":
		return "must be one of: " + strings.ReplaceAll(fe.Param(), " ", ", ")
	case "printascii":
		return "must be printable ASCII"
	case "url":
		return "must be a URL"
	}
	return "is not valid (" + fe.Tag() + ")"
}
