/** The application module: the mneme provider, the Todo controller and the MnemeError filter for every route. */
import { Module } from "@nestjs/common";
import { APP_FILTER } from "@nestjs/core";
import { MnemeErrorFilter } from "./mneme-error.filter.js";
import { MnemeService } from "./mneme.service.js";
import { TodosController } from "./todos.controller.js";

@Module({
  providers: [MnemeService, { provide: APP_FILTER, useClass: MnemeErrorFilter }],
  controllers: [TodosController],
})
export class AppModule {}
