-- A consume alone may be written without locks (issue 27): its one
-- statement writes only while the entitlement is still the row version it
-- read (store/postgres/guarded.go). The statement calls this function when
-- the row changed meanwhile, which fails it, so nothing of it is written,
-- with the SQLSTATE of a serialization failure: the store then charges
-- again under the row's lock. Nothing else calls it.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION stipend_changed(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'stipend: % changed since it was read', what USING ERRCODE = 'serialization_failure';
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION stipend_changed(text);
