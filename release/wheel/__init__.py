"""The one wheel reader: file name, zip members, METADATA, RECORD and digests."""
