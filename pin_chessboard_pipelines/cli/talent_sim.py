"""`pin-chessboard talent-sim serve | publish | rename`: the bundled Talent simulator and the
handbook topics of the demo (README.md#commands)."""

from __future__ import annotations

import argparse
import json
import sys
from urllib.parse import urlsplit

from pin_chessboard_pipelines.errors import EXIT_OK, ConfigError, DatasetError
from pin_chessboard_pipelines.runtime.embedded import demo_module
from pin_chessboard_pipelines.settings import DEFAULT_TALENT_API_URL, load_settings

SIMULATOR = "pin_chessboard_pipelines.talent.simulator"


def _simulator(module: str):
    """A module of the Talent simulator, part of the extra [demo]: the production image has none."""
    return demo_module(f"{SIMULATOR}.{module}", "talent-sim")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    sim = subparsers.add_parser("talent-sim", help="the bundled Talent simulator (HTTP API and topics)")
    commands = sim.add_subparsers(dest="talent_sim_command", required=True)

    serve = commands.add_parser("serve", help="serve the Talent HTTP API from a synthetic dataset")
    serve.add_argument(
        "--port", type=int, default=urlsplit(DEFAULT_TALENT_API_URL).port, help="0 picks a free port"
    )
    serve.add_argument("--host", default="127.0.0.1")
    _dataset_arguments(serve)
    serve.set_defaults(func=serve_command)

    publish = commands.add_parser(
        "publish", help="write the synthetic dataset to the compacted Talent topics"
    )
    _dataset_arguments(publish)
    publish.add_argument("--bootstrap-servers", help="default: KAFKA_BOOTSTRAP_SERVERS")
    publish.add_argument("--tombstone-every", type=int, default=0, help="send every Nth item as a tombstone")
    publish.add_argument(
        "--no-handbook",
        action="store_true",
        help="skip the handbook topics (pin.handbook.regions.v1 / cities.v1)",
    )
    publish.set_defaults(func=publish_command)

    rename = commands.add_parser(
        "rename",
        help="rename a region or city on the handbook topics (handbook-sync republishes its projects)",
    )
    target = rename.add_mutually_exclusive_group(required=True)
    target.add_argument("--region", type=int, metavar="ID", help="region id, e.g. 77")
    target.add_argument("--city", type=int, metavar="ID", help="city id, e.g. 1")
    rename.add_argument("--name", required=True, help="the new display name")
    rename.add_argument("--region-id", type=int, help="the city's region (default: the shipped one)")
    rename.add_argument(
        "--version", type=int, help="the value's version (default: milliseconds since the epoch)"
    )
    rename.add_argument("--bootstrap-servers", help="default: KAFKA_BOOTSTRAP_SERVERS")
    rename.set_defaults(func=rename_command)


def _dataset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset", default="tiny", help="a preset of the simulator's datasets (an unknown name lists them)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a dataset knob, e.g. poison_every=50 or faults=property-objects:1:503:2",
    )


def dataset_spec(args: argparse.Namespace):
    """The preset with its overrides; ConfigError (one line, exit 2) when either is invalid."""
    dataset = _simulator("dataset")
    try:
        return dataset.DatasetSpec.preset(args.dataset).with_overrides(args.overrides)
    except DatasetError as e:
        raise ConfigError(f"talent-sim: {e}") from None


def serve_command(args: argparse.Namespace) -> int:
    spec = dataset_spec(args)
    SimulatorServer = _simulator("server").SimulatorServer
    token = load_settings().talent_api_token
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"talent-sim: --port {args.port} is not a port number")
    try:
        server = SimulatorServer(spec, args.host, args.port, token=token)
    except OSError as e:
        raise ConfigError(f"talent-sim: cannot listen on {args.host}:{args.port}: {e.strerror}") from None
    server.start()
    auth = "bearer" if token else "none"
    print(
        f"talent-sim serving {server.url} dataset={args.dataset} auth={auth} {_simulator('dataset').describe(spec)}",
        flush=True,
    )
    server.serve_forever()
    return EXIT_OK


def publish_command(args: argparse.Namespace) -> int:
    spec = dataset_spec(args)
    publish_dataset = _simulator("publish").publish_dataset
    if args.tombstone_every < 0:
        raise ConfigError("talent-sim: --tombstone-every must be >= 0")
    bootstrap = args.bootstrap_servers or load_settings().kafka_bootstrap_servers
    counts = publish_dataset(spec, bootstrap, tombstone_every=args.tombstone_every)
    if not args.no_handbook:
        counts.update(_simulator("handbook").publish_handbook(bootstrap))
    print(
        json.dumps({"bootstrapServers": bootstrap, "dataset": args.dataset, "published": counts}),
        file=sys.stdout,
    )
    return EXIT_OK


def rename_command(args: argparse.Namespace) -> int:
    handbook = _simulator("handbook")

    name = args.name.strip()
    if not name or len(name) > 128:
        raise ConfigError("talent-sim rename: --name must be 1..128 characters")
    if args.version is not None and args.version < 1:
        raise ConfigError("talent-sim rename: --version must be >= 1")
    bootstrap = args.bootstrap_servers or load_settings().kafka_bootstrap_servers
    if args.region is not None:
        published = handbook.rename_region(bootstrap, args.region, name, args.version)
    else:
        try:
            published = handbook.rename_city(bootstrap, args.city, name, args.region_id, args.version)
        except ValueError as e:
            raise ConfigError(f"talent-sim rename: {e}") from None
    print(json.dumps({"bootstrapServers": bootstrap, **published}, ensure_ascii=False), file=sys.stdout)
    return EXIT_OK
