"""A Starlette implementation of a few Petstore (petstore-expanded) operations."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def make_petstore_app() -> Starlette:
    """findPets, addPet, find pet by id and deletePet over an in-memory store."""
    pets: dict[int, dict[str, Any]] = {
        1: {"id": 1, "name": "Rex", "tag": "dog"},
        2: {"id": 2, "name": "Tom", "tag": "cat"},
        3: {"id": 3, "name": "Fido", "tag": "dog"},
    }

    def _headers(request: Request) -> dict[str, str]:
        rid = request.headers.get("x-request-id")
        return {"x-request-id": rid} if rid else {}

    async def pets_collection(request: Request) -> Response:
        if request.method == "POST":
            body = await request.json()
            if not isinstance(body, dict) or not isinstance(body.get("name"), str):
                return JSONResponse({"code": 400, "message": "name is required"}, 400)
            pet_id = max(pets, default=0) + 1
            pets[pet_id] = {
                "id": pet_id,
                "name": body["name"],
                **({"tag": body["tag"]} if "tag" in body else {}),
            }
            return JSONResponse(pets[pet_id])
        tags = request.query_params.getlist("tags")
        found = [p for p in pets.values() if not tags or p.get("tag") in tags]
        limit = request.query_params.get("limit")
        if limit is not None:
            found = found[: int(limit)]
        return JSONResponse(found, headers=_headers(request))

    async def pet_item(request: Request) -> Response:
        pet_id = int(request.path_params["id"])
        if pet_id not in pets:
            return JSONResponse({"code": 404, "message": f"pet {pet_id} not found"}, 404)
        if request.method == "DELETE":
            del pets[pet_id]
            return Response(status_code=204)
        return JSONResponse(pets[pet_id], headers=_headers(request))

    return Starlette(
        routes=[
            Route("/v2/pets", pets_collection, methods=["GET", "POST"]),
            Route("/v2/pets/{id:int}", pet_item, methods=["GET", "DELETE"]),
        ]
    )
