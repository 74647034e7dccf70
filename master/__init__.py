"""The Horus master daemon: gRPC api -> services -> SQLite store (see ``master.app.Master``)."""
