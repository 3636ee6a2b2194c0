-- A consume alone may be written without locks (issue 27): its one
-- statement writes only while the entitlement (and the account) are still
-- the row versions it decided on (store/postgres/guarded.go). The statement
-- calls this function when they changed meanwhile, which fails it, so
-- nothing of it is written, with the SQLSTATE of a serialization failure:
-- the store then reads again, and charges under the row's lock. It never
-- returns (its type is the one the statement answers). Nothing else calls it.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION stipend_changed(what text) RETURNS xid LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'stipend: % changed since it was read', what USING ERRCODE = 'serialization_failure';
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION stipend_changed(text);
