package api

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/go-playground/validator/v10"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// newValidator returns a validator that names fields by their JSON names;
// an embedded struct adds no name, as its fields are the parent's in JSON.
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
		out := &Error{Status: 400, Kind: KindInvalidRequest}
		for _, fe := range ve {
			out.Errors = append(out.Errors, FieldError{Field: fieldPath(fe.Namespace()), Detail: tagMessage(fe)})
		}
		out.Detail = "the request is invalid: " + joinField(out.Errors[0].Field, out.Errors[0].Detail)
		return out
	}
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
	var ee *entitlement.FieldError
	if errors.As(err, &ee) {
		return Invalid(ee.Field, ee.Reason)
	}
	var me *money.FieldError
	if errors.As(err, &me) {
		return Invalid(me.Field, me.Reason)
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
