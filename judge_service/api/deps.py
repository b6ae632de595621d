"""Dependencies as `Annotated` aliases, so routes declare what they need by type."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from judge_service.config import Settings
from judge_service.pipeline import Engine


def get_engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


EngineDep = Annotated[Engine, Depends(get_engine)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
